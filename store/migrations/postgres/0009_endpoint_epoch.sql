-- PostgreSQL twin of sqlite/0009_endpoint_epoch.sql.
CREATE TABLE endpoint_epoch (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    epoch BIGINT NOT NULL
);
INSERT INTO endpoint_epoch (id, epoch) VALUES (1, 0);

CREATE FUNCTION endpoints_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE endpoint_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER endpoints_epoch_insert AFTER INSERT ON endpoints FOR EACH ROW EXECUTE FUNCTION endpoints_epoch();
CREATE TRIGGER endpoints_epoch_update AFTER UPDATE ON endpoints FOR EACH ROW EXECUTE FUNCTION endpoints_epoch();
CREATE TRIGGER endpoints_epoch_delete AFTER DELETE ON endpoints FOR EACH ROW EXECUTE FUNCTION endpoints_epoch();
