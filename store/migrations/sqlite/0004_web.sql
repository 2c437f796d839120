-- Board sessions of human operators. Only the SHA-256 of the session token is kept,
-- so a copy of the database file does not hand out live logins.
CREATE TABLE web_sessions (
    token_hash BLOB    PRIMARY KEY,
    human_id   INTEGER NOT NULL REFERENCES humans(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    user_agent TEXT    NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
-- Pruning expired sessions.
CREATE INDEX web_sessions_expiry ON web_sessions(expires_at);

-- The board lists todos newest first filtered by state alone or by queue alone.
-- todos_by_state (state, queue, id) serves a filter on both, but for one of them it
-- cannot yield id order: SQLite would walk the whole table, or sort every match,
-- which at 100,000 todos with a rare state (a few failed among many done) is a full
-- scan per page view. These two keep every board listing a short index walk.
CREATE INDEX todos_state_id ON todos(state, id);
CREATE INDEX todos_queue_id ON todos(queue, id);
