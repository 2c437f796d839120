-- Payloads live outside the todos row, so that a claim, heartbeat or completion
-- rewrites a small record rather than a multi-kilobyte one (SQLite rewrites the whole
-- row on UPDATE, overflow pages included). A todo made from a webhook event has no row
-- here: its payload is the event's body, stored once.
CREATE TABLE todo_payloads (
    todo_id INTEGER PRIMARY KEY REFERENCES todos(id) ON DELETE CASCADE,
    payload TEXT NOT NULL
) STRICT;
INSERT INTO todo_payloads (todo_id, payload)
    SELECT id, payload FROM todos WHERE source_event_id IS NULL AND payload != '';
ALTER TABLE todos DROP COLUMN payload;
