-- A delivery's first event, by delivery id or by replay key: one probe of that
-- key's unique index, whatever the statistics of webhook_events say. Asked in a
-- join, PostgreSQL chose by its estimates, and a plan made while a webhook had
-- no events (kept for the connection's life) read every event of the webhook,
-- or the whole table, on each delivery. Here the key is named by a range and
-- the rows asked for in its order with sorting off, so only the key's index,
-- which yields that order, can serve.

-- webhook_delivery_event is the event of webhook with that delivery id.
CREATE FUNCTION webhook_delivery_event(webhook bigint, delivery text) RETURNS TABLE (id bigint, todo_id bigint)
    LANGUAGE plpgsql STABLE SET enable_sort = off SET enable_incremental_sort = off AS $$
BEGIN
    RETURN QUERY SELECT e.id, e.todo_id FROM webhook_events e
        WHERE e.webhook_id = webhook AND e.delivery_id >= delivery AND e.delivery_id <= delivery
        ORDER BY e.delivery_id LIMIT 1;
END;
$$;

-- webhook_replay_event is the event of webhook with that replay key.
CREATE FUNCTION webhook_replay_event(webhook bigint, key bytea) RETURNS TABLE (id bigint, todo_id bigint, received_at bigint)
    LANGUAGE plpgsql STABLE SET enable_sort = off SET enable_incremental_sort = off AS $$
BEGIN
    RETURN QUERY SELECT e.id, e.todo_id, e.received_at FROM webhook_events e
        WHERE e.webhook_id = webhook AND e.replay_key >= key AND e.replay_key <= key
        ORDER BY e.replay_key LIMIT 1;
END;
$$;
