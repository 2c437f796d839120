-- PostgreSQL twin of sqlite/0003_modules.sql.
CREATE TABLE tool_pins (
    module       TEXT   NOT NULL,
    tool         TEXT   NOT NULL,
    hash         TEXT   NOT NULL,
    pending_hash TEXT,
    pinned_at    BIGINT NOT NULL,
    pending_at   BIGINT,
    PRIMARY KEY (module, tool)
);
