-- Humans who operate the board. Passwords are bcrypt hashes; never plaintext.
CREATE TABLE humans (
    id            INTEGER PRIMARY KEY,
    username      TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

-- One row per agent credential. Only the SHA-256 of the credential is kept; the
-- credential itself is shown once at creation. List columns are JSON arrays of text.
CREATE TABLE endpoints (
    id                        INTEGER PRIMARY KEY,
    agent_id                  TEXT    NOT NULL,
    agent_name                TEXT    NOT NULL,
    owner_human_id            INTEGER REFERENCES humans(id),
    credential_hash           BLOB    NOT NULL UNIQUE,
    credential_hint           TEXT    NOT NULL,
    scope_verbs               TEXT    NOT NULL DEFAULT '[]',
    scope_queues              TEXT    NOT NULL DEFAULT '[]',
    default_lease_ttl_seconds INTEGER,
    max_webhooks              INTEGER NOT NULL DEFAULT 0,
    webhook_sources           TEXT    NOT NULL DEFAULT '[]',
    webhook_queues            TEXT    NOT NULL DEFAULT '[]',
    capabilities              TEXT    NOT NULL DEFAULT '[]',
    tool_allow                TEXT    NOT NULL DEFAULT '[]',
    tool_deny                 TEXT    NOT NULL DEFAULT '[]',
    rate_per_second           REAL,
    rate_burst                INTEGER,
    created_at                INTEGER NOT NULL,
    revoked_at                INTEGER
) STRICT;
CREATE INDEX endpoints_agent ON endpoints(agent_id);

-- The durable queue. Times are Unix milliseconds. lease_seq is the fencing token: it
-- grows on every claim and never goes back, so a worker that lost its lease can be
-- told apart from the one that holds the todo now.
CREATE TABLE todos (
    id                 INTEGER PRIMARY KEY,
    queue              TEXT    NOT NULL,
    state              TEXT    NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    payload            TEXT    NOT NULL,
    payload_size       INTEGER NOT NULL,
    source_type        TEXT    NOT NULL DEFAULT 'manual',
    source_webhook_id  INTEGER,
    source_event_id    INTEGER,
    source_event_type  TEXT    NOT NULL DEFAULT '',
    verified           INTEGER NOT NULL DEFAULT 0,
    trust_mode         TEXT    NOT NULL DEFAULT 'none',
    webhook_created_by TEXT    NOT NULL DEFAULT '',
    created_by         TEXT    NOT NULL,
    owner              TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL DEFAULT 5,
    lease_seq          INTEGER NOT NULL DEFAULT 0,
    lease_expires_at   INTEGER,
    available_at       INTEGER NOT NULL,
    result             TEXT    NOT NULL DEFAULT '',
    last_error         TEXT    NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    finished_at        INTEGER
) STRICT;
-- claim_next reads one entry of this index per queue: the oldest pending id whose
-- backoff has passed. Partial, so done/failed history never slows a claim.
CREATE INDEX todos_claimable ON todos(queue, id, available_at) WHERE state = 'pending';
-- The reaper's scan: only claimed rows, ordered by expiry.
CREATE INDEX todos_leases ON todos(lease_expires_at) WHERE state = 'claimed';
-- Listings by queue/state, newest first; retention pruning of done rows.
CREATE INDEX todos_by_state ON todos(state, queue, id);
CREATE INDEX todos_finished ON todos(finished_at) WHERE state = 'done';

-- Append-only record of every mutating action.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    action  TEXT    NOT NULL,
    target  TEXT    NOT NULL DEFAULT '',
    outcome TEXT    NOT NULL DEFAULT 'ok',
    detail  TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_target ON audit(target, id);
CREATE INDEX audit_actor ON audit(actor, id);
CREATE INDEX audit_action ON audit(action, id);
