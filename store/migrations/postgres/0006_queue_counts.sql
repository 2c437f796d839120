-- PostgreSQL twin of sqlite/0006_queue_counts.sql. The counts change in the same
-- transaction as the todo; each change is one atomic upsert or update of its row,
-- so concurrent transactions never lose a count.
CREATE TABLE queue_counts (
    queue TEXT   NOT NULL,
    state TEXT   NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (queue, state)
);

INSERT INTO queue_counts (queue, state, n) SELECT queue, state, count(*) FROM todos GROUP BY queue, state;

CREATE FUNCTION todos_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE queue_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO queue_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
            ON CONFLICT (queue, state) DO UPDATE SET n = queue_counts.n + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER todos_count_insert AFTER INSERT ON todos FOR EACH ROW EXECUTE FUNCTION todos_count();
CREATE TRIGGER todos_count_delete AFTER DELETE ON todos FOR EACH ROW EXECUTE FUNCTION todos_count();
CREATE TRIGGER todos_count_update AFTER UPDATE OF queue, state ON todos FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.queue IS DISTINCT FROM NEW.queue)
    EXECUTE FUNCTION todos_count();

DROP INDEX todos_by_state;
