-- PostgreSQL twin of sqlite/0008_settings.sql.
CREATE TABLE settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

INSERT INTO settings (name, value)
    SELECT 'secrets_keyed', '1' FROM webhooks
    WHERE signing_secret LIKE 'enc:v1:%' OR previous_secret LIKE 'enc:v1:%'
    LIMIT 1;
