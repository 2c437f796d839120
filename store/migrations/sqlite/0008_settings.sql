-- Facts about the database as a whole, one row each. secrets_keyed: a secret
-- encryption key has been used with this database, so webhook secrets are meant to
-- be sealed, and a process without the key must not store one as plaintext (even
-- before the first secret has been sealed).
CREATE TABLE settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT, WITHOUT ROWID;

-- A database that already holds sealed secrets was set up with a key.
INSERT INTO settings (name, value)
    SELECT 'secrets_keyed', '1' FROM webhooks
    WHERE signing_secret LIKE 'enc:v1:%' OR previous_secret LIKE 'enc:v1:%'
    LIMIT 1;
