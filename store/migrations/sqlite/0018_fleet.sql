-- Several serve processes on one database (PostgreSQL; on SQLite there is one).
-- processes: one row per running serve, written at its start and on every
-- heartbeat; a row whose heartbeat stopped is a process that died, shown as such
-- and deleted by the others after a while. modules is a JSON array of the
-- process's module states (each process supervises its own modules).
CREATE TABLE processes (
    id           TEXT    NOT NULL PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    modules      TEXT    NOT NULL DEFAULT '[]'
);

-- leaders: who does a job only one process may do at a time (the reaper), until
-- when. The holder renews its lease on its heartbeat; once it lapses another
-- process takes the role.
CREATE TABLE leaders (
    role       TEXT    NOT NULL PRIMARY KEY,
    process_id TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- login_throttle: the board's failed logins per key (a SHA-256 of the username
-- and address, the network, the device or the session), shared by every process
-- so that a guesser gains nothing by spreading over them.
CREATE TABLE login_throttle (
    key      TEXT    NOT NULL PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_at  INTEGER NOT NULL,
    until_at INTEGER NOT NULL
);
