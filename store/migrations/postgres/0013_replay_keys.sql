-- PostgreSQL twin of sqlite/0013_replay_keys.sql.
ALTER TABLE webhook_events ADD COLUMN replay_key BYTEA;
CREATE UNIQUE INDEX webhook_events_replay ON webhook_events(webhook_id, replay_key) WHERE replay_key IS NOT NULL;
