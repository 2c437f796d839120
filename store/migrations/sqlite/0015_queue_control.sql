-- A human's control of the queue (#31, part B): cancelled todos, paused queues and
-- the human gate.
--
-- A cancelled todo ends in state failed, as a dead letter does, so that it is never
-- claimed or retried by itself; cancelled_by (the human who cancelled it) tells it
-- apart from a dead letter.
ALTER TABLE todos ADD COLUMN cancelled_by TEXT NOT NULL DEFAULT '';
-- The human gate. A todo awaiting approval is claimed with no lease expiry (the
-- reaper's scan, lease_expires_at <= now, never finds it); approval is the last
-- question's outcome: asked, approved or denied.
ALTER TABLE todos ADD COLUMN approval TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_question TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_comment TEXT NOT NULL DEFAULT '';
ALTER TABLE todos ADD COLUMN approval_by TEXT NOT NULL DEFAULT '';
-- After a decision the todo is pending again, claimable by everyone from
-- available_at and before that by reserved_for (the worker that asked) alone.
ALTER TABLE todos ADD COLUMN reserved_for TEXT;
-- The board's and /metrics' "awaiting approval": few rows, never written by a
-- claim or a completion.
CREATE INDEX todos_awaiting ON todos(queue, id) WHERE state = 'claimed' AND lease_expires_at IS NULL;
-- claim_next's look for a todo reserved for its caller.
CREATE INDEX todos_reserved ON todos(reserved_for, id) WHERE reserved_for IS NOT NULL;

-- Paused queues: their todos are not claimable; deliveries still land.
CREATE TABLE paused_queues (
    queue     TEXT    PRIMARY KEY,
    paused_by TEXT    NOT NULL,
    paused_at INTEGER NOT NULL
) STRICT;

-- Agents hand work on (add_todo): the queues an endpoint may add to, and the
-- count of the pending todos an agent added, which its cap bounds.
ALTER TABLE endpoints ADD COLUMN add_queues TEXT NOT NULL DEFAULT '[]';
CREATE INDEX todos_added_by_agent ON todos(created_by) WHERE state = 'pending' AND source_type = 'agent';
