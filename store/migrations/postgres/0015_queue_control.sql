-- PostgreSQL twin of sqlite/0015_queue_control.sql.
ALTER TABLE todos ADD COLUMN cancelled_by TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_question TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_comment TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_by TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN reserved_for TEXT;
CREATE INDEX todos_awaiting ON todos(queue, id) WHERE state = 'claimed' AND lease_expires_at IS NULL;
CREATE INDEX todos_reserved ON todos(reserved_for, id) WHERE reserved_for IS NOT NULL;

CREATE TABLE paused_queues (
    queue     TEXT   PRIMARY KEY,
    paused_by TEXT   NOT NULL,
    paused_at BIGINT NOT NULL
);

ALTER TABLE endpoints ADD COLUMN add_queues TEXT NOT NULL DEFAULT '[]';
CREATE INDEX todos_added_by_agent ON todos(created_by) WHERE state = 'pending' AND source_type = 'agent';
