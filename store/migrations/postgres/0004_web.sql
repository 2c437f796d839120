-- PostgreSQL twin of sqlite/0004_web.sql.
CREATE TABLE web_sessions (
    token_hash BYTEA  PRIMARY KEY,
    human_id   BIGINT NOT NULL REFERENCES humans(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    user_agent TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX web_sessions_expiry ON web_sessions(expires_at);

CREATE INDEX todos_state_id ON todos(state, id);
CREATE INDEX todos_queue_id ON todos(queue, id);
