-- todos_free_keys (migration 0023) as it was, but the todo it makes its key's
-- front is claimable from the time at, not from when it was added: its
-- available_at says since when it has been claimable, which the board's "next
-- up waiting" and /metrics' switchboard_queue_head_wait_seconds read
-- (QueueHeads). A later available_at (a delay) holds.
CREATE OR REPLACE FUNCTION todos_free_keys(ids bigint[], at bigint, after bigint)
    RETURNS TABLE (front bigint, x_id bigint, x_queue text, x_key text, x_source text, x_available bigint, f_id bigint)
    LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM todos c WHERE c.id = ANY(ids) AND c.key IS NOT NULL AND c.key_waiting = 0) THEN
        RETURN;
    END IF;
    RETURN QUERY WITH fronts AS (SELECT c.id, c.queue, c.key FROM todos c
            WHERE c.id = ANY(ids) AND c.key IS NOT NULL AND c.key_waiting = 0),
        nx AS (UPDATE todos SET key_waiting = 0, available_at = greatest(todos.available_at, at) WHERE todos.id IN (SELECT (SELECT n.id FROM todos n
                WHERE n.queue = f.queue AND n.key = f.key AND n.state = 'pending' AND n.key_waiting = 1
                ORDER BY n.id LIMIT 1) FROM fronts f)
            RETURNING todos.id AS n_id, todos.queue AS n_queue, todos.key AS n_key, todos.source_type AS n_source,
                todos.available_at AS n_available),
        freed AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
            SELECT at, 'system', 'todo.key_free', 'todo:' || nx.n_id, 'ok', '' FROM nx
            RETURNING audit.id AS a_id, audit.target AS a_target)
        SELECT f.id, nx.n_id, nx.n_queue, nx.n_key, nx.n_source, nx.n_available, freed.a_id
        FROM fronts f JOIN nx ON nx.n_queue = f.queue AND nx.n_key = f.key JOIN freed ON freed.a_target = 'todo:' || nx.n_id;
END;
$$;
