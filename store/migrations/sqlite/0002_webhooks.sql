-- Webhooks: one ingest URL each. The token is the URL's last segment; it routes a
-- delivery to its webhook but proves nothing (the provider signature does). Secrets
-- are plaintext or 'enc:v1:<base64(nonce||ciphertext)>' sealed with the row id as
-- additional data. During a rotation the previous secret stays valid until
-- previous_expires_at. Rows are never deleted, only marked, so the event history
-- keeps its webhook and a token is never handed out twice.
CREATE TABLE webhooks (
    id                  INTEGER PRIMARY KEY,
    token               TEXT    NOT NULL UNIQUE,
    source_type         TEXT    NOT NULL,
    queue               TEXT    NOT NULL,
    description         TEXT    NOT NULL DEFAULT '',
    signing_secret      TEXT    NOT NULL,
    previous_secret     TEXT,
    previous_expires_at INTEGER,
    created_by          TEXT    NOT NULL,
    endpoint_id         INTEGER REFERENCES endpoints(id),
    created_at          INTEGER NOT NULL,
    rotated_at          INTEGER,
    deleted_at          INTEGER
) STRICT;
-- An endpoint's live webhooks: its listing and its ceiling count.
CREATE INDEX webhooks_endpoint ON webhooks(endpoint_id, id) WHERE deleted_at IS NULL;

-- Every verified delivery, with its raw body. delivery_id is the provider's id and
-- the idempotency key; NULL when the provider gives none (NULLs never collide, so
-- such deliveries are never deduplicated). todo_id goes NULL when retention prunes
-- the todo; the event and its body stay for replay.
CREATE TABLE webhook_events (
    id          INTEGER PRIMARY KEY,
    webhook_id  INTEGER NOT NULL REFERENCES webhooks(id),
    delivery_id TEXT,
    event_type  TEXT    NOT NULL DEFAULT '',
    received_at INTEGER NOT NULL,
    headers     TEXT    NOT NULL DEFAULT '{}',
    body        BLOB    NOT NULL,
    size        INTEGER NOT NULL,
    verified    INTEGER NOT NULL,
    trust_mode  TEXT    NOT NULL,
    todo_id     INTEGER REFERENCES todos(id) ON DELETE SET NULL,
    UNIQUE (webhook_id, delivery_id)
) STRICT;
-- Listings per webhook, newest first.
CREATE INDEX webhook_events_webhook ON webhook_events(webhook_id, id);
-- ON DELETE SET NULL looks events up by todo when the todo is pruned.
CREATE INDEX webhook_events_todo ON webhook_events(todo_id) WHERE todo_id IS NOT NULL;
