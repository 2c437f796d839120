-- A counter every change to an endpoint moves, in the same transaction: a process
-- that keeps endpoints it has looked up (serve authenticates every MCP request)
-- reads this one integer to know whether what it holds is still what the table
-- says, whoever changed it (this process, or the CLI in another).
CREATE TABLE endpoint_epoch (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL
) STRICT;
INSERT INTO endpoint_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER endpoints_epoch_insert AFTER INSERT ON endpoints BEGIN
    UPDATE endpoint_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER endpoints_epoch_update AFTER UPDATE ON endpoints BEGIN
    UPDATE endpoint_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER endpoints_epoch_delete AFTER DELETE ON endpoints BEGIN
    UPDATE endpoint_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
