-- The board's and the CLI's todo search walks one of these, newest first, for its
-- exact terms: who made a todo (webhook:N for a delivery's todo, human:… or
-- agent:…), its source type, and its provider event type. Each costs a delivery
-- one more index entry (the event type's none for a todo without one); a search
-- for the text of an error has no index and reads the rows its other filters leave.
CREATE INDEX todos_created_by ON todos(created_by, id);
CREATE INDEX todos_source_type ON todos(source_type, id);
CREATE INDEX todos_event_type ON todos(source_event_type, id) WHERE source_event_type != '';
