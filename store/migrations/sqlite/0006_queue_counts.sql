-- Todo counts by queue and state, kept by triggers in the same transaction as the
-- change, so the board, /metrics and systemd's STATUS line read a handful of rows
-- instead of scanning an index over every todo ever kept (O(queues), not O(todos)).
CREATE TABLE queue_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) STRICT, WITHOUT ROWID;

INSERT INTO queue_counts (queue, state, n) SELECT queue, state, count(*) FROM todos GROUP BY queue, state;

CREATE TRIGGER todos_count_insert AFTER INSERT ON todos BEGIN
    INSERT INTO queue_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER todos_count_delete AFTER DELETE ON todos BEGIN
    UPDATE queue_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;

CREATE TRIGGER todos_count_update AFTER UPDATE OF queue, state ON todos
    WHEN old.state IS NOT new.state OR old.queue IS NOT new.queue
BEGIN
    UPDATE queue_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO queue_counts (queue, state, n) VALUES (new.queue, new.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

-- Counting was this index's main job; listings by state use todos_state_id and
-- todos_queue_id. One index fewer to update on every claim and completion.
DROP INDEX todos_by_state;
