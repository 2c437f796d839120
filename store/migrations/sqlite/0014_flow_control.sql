-- Flow control: keys, coalescing, delays, priorities and webhook rules.
--
-- key: todos of one (queue, key) are worked one at a time, oldest first. NULL is
-- keyless. key_waiting is 1 while a todo waits behind an earlier todo of its key
-- that is pending or claimed: only the key's front (key_waiting = 0) can be
-- claimed, so a claim never has to look past a held key, and the claim index
-- holds only todos that could be taken. When the front ends, the next waiting
-- todo of its key becomes the front, in the same transaction.
ALTER TABLE todos ADD COLUMN key TEXT;
ALTER TABLE todos ADD COLUMN key_waiting INTEGER NOT NULL DEFAULT 0;
-- priority: claim_next takes the highest first, oldest first within one.
ALTER TABLE todos ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- coalesced: how many later todos of its key this pending todo absorbed.
ALTER TABLE todos ADD COLUMN coalesced INTEGER NOT NULL DEFAULT 0;

-- claim_next reads one entry per queue: the first todo by priority then age
-- that is pending, not waiting behind its key, and past its available_at.
-- (todos_claimable stays for the board's pending listings, newest first.)
CREATE INDEX todos_ready ON todos(queue, priority DESC, id, available_at)
    WHERE state = 'pending' AND key_waiting = 0;
-- At most one front per key: never two todos of one key claimable or claimed.
CREATE UNIQUE INDEX todos_key_front ON todos(queue, key)
    WHERE key IS NOT NULL AND key_waiting = 0 AND state IN ('pending', 'claimed');
-- A key's pending todos in order: the next front, the todo a new one folds into.
CREATE INDEX todos_key_pending ON todos(queue, key, id) WHERE key IS NOT NULL AND state = 'pending';
-- The board's and todo list's key: search, which finds a key's todos in any state.
CREATE INDEX todos_key ON todos(key, id) WHERE key IS NOT NULL;

-- Per queue: todos folded into a pending one, deliveries a webhook rule filtered
-- out. Counters for /metrics, kept in the transaction that did it.
CREATE TABLE queue_flow (
    queue     TEXT    PRIMARY KEY,
    coalesced INTEGER NOT NULL DEFAULT 0,
    filtered  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- A webhook's rules (filter, key template, coalesce, debounce, priority) as JSON;
-- '' = none: every delivery makes a todo, as before.
ALTER TABLE webhooks ADD COLUMN rules TEXT NOT NULL DEFAULT '';
-- 1: the delivery was verified and kept, but a rule filtered it out: no todo.
ALTER TABLE webhook_events ADD COLUMN filtered INTEGER NOT NULL DEFAULT 0;
