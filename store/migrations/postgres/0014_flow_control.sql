-- PostgreSQL twin of sqlite/0014_flow_control.sql.
ALTER TABLE todos ADD COLUMN key TEXT;
ALTER TABLE todos ADD COLUMN key_waiting BIGINT NOT NULL DEFAULT 0;
ALTER TABLE todos ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
ALTER TABLE todos ADD COLUMN coalesced BIGINT NOT NULL DEFAULT 0;

CREATE INDEX todos_ready ON todos(queue, priority DESC, id, available_at)
    WHERE state = 'pending' AND key_waiting = 0;
CREATE UNIQUE INDEX todos_key_front ON todos(queue, key)
    WHERE key IS NOT NULL AND key_waiting = 0 AND state IN ('pending', 'claimed');
CREATE INDEX todos_key_pending ON todos(queue, key, id) WHERE key IS NOT NULL AND state = 'pending';
CREATE INDEX todos_key ON todos(key, id) WHERE key IS NOT NULL;

CREATE TABLE queue_flow (
    queue     TEXT    PRIMARY KEY,
    coalesced BIGINT  NOT NULL DEFAULT 0,
    filtered  BIGINT  NOT NULL DEFAULT 0
);

ALTER TABLE webhooks ADD COLUMN rules TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN filtered BIGINT NOT NULL DEFAULT 0;
