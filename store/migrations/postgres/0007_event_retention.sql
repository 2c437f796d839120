-- PostgreSQL twin of sqlite/0007_event_retention.sql.
CREATE INDEX webhook_events_orphaned ON webhook_events(received_at) WHERE todo_id IS NULL;
CREATE INDEX todos_replays ON todos(source_event_id) WHERE source_type = 'replay';
