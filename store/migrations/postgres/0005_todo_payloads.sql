-- PostgreSQL twin of sqlite/0005_todo_payloads.sql.
CREATE TABLE todo_payloads (
    todo_id BIGINT PRIMARY KEY REFERENCES todos(id) ON DELETE CASCADE,
    payload TEXT NOT NULL
);
INSERT INTO todo_payloads (todo_id, payload)
    SELECT id, payload FROM todos WHERE source_event_id IS NULL AND payload != '';
ALTER TABLE todos DROP COLUMN payload;
