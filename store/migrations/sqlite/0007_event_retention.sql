-- Event retention deletes events that no todo needs any more, oldest first. An
-- event's todo_id becomes NULL when retention prunes that todo, so this partial
-- index holds exactly the candidates.
CREATE INDEX webhook_events_orphaned ON webhook_events(received_at) WHERE todo_id IS NULL;
-- A replayed todo reads its payload from the event it replays: retention keeps
-- that event while the replay lives. Replays are rare, so the index is small.
CREATE INDEX todos_replays ON todos(source_event_id) WHERE source_type = 'replay';
