-- PostgreSQL twin of sqlite/0018_fleet.sql.
CREATE TABLE processes (
    id           TEXT    NOT NULL PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          BIGINT  NOT NULL,
    version      TEXT    NOT NULL,
    started_at   BIGINT  NOT NULL,
    heartbeat_at BIGINT  NOT NULL,
    modules      TEXT    NOT NULL DEFAULT '[]'
);

CREATE TABLE leaders (
    role       TEXT   NOT NULL PRIMARY KEY,
    process_id TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE login_throttle (
    key      TEXT    NOT NULL PRIMARY KEY,
    failures BIGINT  NOT NULL,
    last_at  BIGINT  NOT NULL,
    until_at BIGINT  NOT NULL
);
