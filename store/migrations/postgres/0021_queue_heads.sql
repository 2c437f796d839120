-- A queue's heads (the todos claim_next takes next: highest priority, then
-- oldest), read through todos_ready alone, whatever the table's statistics say.
-- Asked in one statement, PostgreSQL chose by its estimates: with none (a table
-- not analysed yet) or stale ones (taken before a burst of adds) it expected one
-- pending todo, found sorting it free, and read and sorted every pending todo of
-- the queue through todos_claimable on each claim. In these functions sorting is
-- off (enable_sort, enable_incremental_sort), so only an index that yields the
-- order (queue, priority DESC, id) serves: todos_ready, one probe. The queue is
-- named by a range, so that it stays in the order.

-- todos_heads reads the first n heads of queue q at time at (unix ms), unlocked.
CREATE FUNCTION todos_heads(q text, at bigint, n bigint) RETURNS TABLE (id bigint, priority bigint, available_at bigint)
    LANGUAGE plpgsql STABLE SET enable_sort = off SET enable_incremental_sort = off AS $$
BEGIN
    RETURN QUERY SELECT t.id, t.priority, t.available_at FROM todos t
        WHERE t.state = 'pending' AND t.key_waiting = 0 AND t.queue >= q AND t.queue <= q AND t.available_at <= at
        ORDER BY t.queue, t.priority DESC, t.id LIMIT n;
END;
$$;

-- todos_lock_heads locks them for a claim, passing over those another
-- transaction holds (FOR UPDATE SKIP LOCKED). It runs with a snapshot of its
-- own, newer than the claiming statement's: a todo another transaction made
-- claimable in between would be locked and not claimed, and the claim would
-- find nothing. None can: every write transaction on todos first takes the
-- writer lock (store/reconnect.go, pgWriterLock), which the claiming one holds.
CREATE FUNCTION todos_lock_heads(q text, at bigint, n bigint) RETURNS TABLE (id bigint, priority bigint)
    LANGUAGE plpgsql VOLATILE SET enable_sort = off SET enable_incremental_sort = off AS $$
BEGIN
    RETURN QUERY SELECT t.id, t.priority FROM todos t
        WHERE t.state = 'pending' AND t.key_waiting = 0 AND t.queue >= q AND t.queue <= q AND t.available_at <= at
        ORDER BY t.queue, t.priority DESC, t.id LIMIT n FOR UPDATE SKIP LOCKED;
END;
$$;
