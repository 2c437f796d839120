-- The parts of the claim and complete statements (store/leases_pg.go,
-- leases_sets_pg.go) that only some runs need, in functions: the reservations a
-- human's decisions leave, and the todos waiting behind a key. In one
-- statement, PostgreSQL set every part up on each run, needed or not; in a
-- function, a part runs only when its IF finds work for it.
--
-- todos_lock_claims assigns to claims ns (their places, in claim order) of
-- owners (one each) what they claim from queue q at time at (unix ms),
-- locked FOR UPDATE SKIP LOCKED: nothing while the queue is paused; to a
-- worker's claims, the todos still reserved for that worker after a human's
-- decision, oldest first to its earliest claim; to the other claims, the
-- queue's heads in claim order, first to the earliest: read where there are no
-- reservations as todos_lock_heads reads them (with sorting off, so through
-- todos_ready alone; a call of it cost more), and through it where there are.
-- Sorting off makes the sorts it cannot do without (the reservations' windows)
-- look dear enough for JIT, which would compile them on every run (0.3 s): jit
-- is off in it, as on the writer's connection. A claim left without a todo gets
-- no row. Its statements see only what was
-- committed before each of them runs; as todos_lock_heads, it relies on the
-- writer lock that the claiming transaction holds.
CREATE FUNCTION todos_lock_claims(q text, at bigint, ns bigint[], owners text[]) RETURNS TABLE (n bigint, id bigint)
    LANGUAGE plpgsql VOLATILE SET enable_sort = off SET enable_incremental_sort = off SET jit = off AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(ns) = 0 OR EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = q) THEN
        RETURN;
    END IF;
    -- The reservations are looked up by todos_reserved alone (see
    -- pgClaimGated).
    IF NOT EXISTS (SELECT 1 FROM todos t WHERE t.reserved_for = ANY(owners) AND t.state || '' = 'pending'
            AND t.queue || '' = q AND t.available_at + 0 > at) THEN
        RETURN QUERY SELECT ns[h.k], h.id FROM (SELECT l.id, row_number() OVER (ORDER BY l.priority DESC, l.id) AS k
            FROM (SELECT t.id, t.priority FROM todos t
                WHERE t.state = 'pending' AND t.key_waiting = 0 AND t.queue >= q AND t.queue <= q AND t.available_at <= at
                ORDER BY t.queue, t.priority DESC, t.id LIMIT cardinality(ns) FOR UPDATE SKIP LOCKED) l) h;
        RETURN;
    END IF;
    RETURN QUERY WITH req AS (SELECT * FROM unnest(ns, owners) AS r(r_n, r_owner)),
        -- Each worker's oldest reservations, as many as it has claims: only
        -- those are locked.
        mine AS (SELECT m.m_id, m.m_owner FROM (SELECT req.r_owner AS o, count(*) AS c FROM req GROUP BY req.r_owner) w,
            LATERAL (SELECT t.id AS m_id, t.reserved_for AS m_owner FROM todos t
                WHERE t.reserved_for = w.o AND t.state || '' = 'pending' AND t.queue || '' = q AND t.available_at + 0 > at
                ORDER BY t.id LIMIT w.c FOR UPDATE SKIP LOCKED) m),
        reserved AS (SELECT r.r_n, m.m_id AS a_id
            FROM (SELECT *, row_number() OVER (PARTITION BY m_owner ORDER BY m_id) AS k FROM mine) m
            JOIN (SELECT *, row_number() OVER (PARTITION BY r_owner ORDER BY r_n) AS k FROM req) r
                ON r.r_owner = m.m_owner AND r.k = m.k),
        rest AS (SELECT req.r_n, row_number() OVER (ORDER BY req.r_n) AS k FROM req
            WHERE req.r_n NOT IN (SELECT reserved.r_n FROM reserved)),
        heads AS (SELECT l.id AS h_id, row_number() OVER (ORDER BY l.priority DESC, l.id) AS k
            FROM todos_lock_heads(q, at, (SELECT count(*) FROM rest)) l)
        SELECT reserved.r_n, reserved.a_id FROM reserved
        UNION ALL SELECT rest.r_n, heads.h_id FROM rest JOIN heads ON heads.k = rest.k;
END;
$$;

-- todos_free_keys is keyEnded (store/leases.go) for the todos ids that a
-- transition's statement changed and that left the queue for good (done or
-- failed): for each that was its key's front, the key's next waiting todo
-- becomes the front, audited as todo.key_free at time at. It returns, for each
-- front, the new front's id, queue, key, source type and available_at, and the
-- audit row's id. after is the count of the statement's own audit rows: asking
-- for it writes them before the key_free rows, so that the log reads cause,
-- then effect, as on SQLite. It reads the fronts as the statement left them; a
-- transition changes neither a todo's key nor its key_waiting.
CREATE FUNCTION todos_free_keys(ids bigint[], at bigint, after bigint)
    RETURNS TABLE (front bigint, x_id bigint, x_queue text, x_key text, x_source text, x_available bigint, f_id bigint)
    LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM todos c WHERE c.id = ANY(ids) AND c.key IS NOT NULL AND c.key_waiting = 0) THEN
        RETURN;
    END IF;
    RETURN QUERY WITH fronts AS (SELECT c.id, c.queue, c.key FROM todos c
            WHERE c.id = ANY(ids) AND c.key IS NOT NULL AND c.key_waiting = 0),
        nx AS (UPDATE todos SET key_waiting = 0 WHERE todos.id IN (SELECT (SELECT n.id FROM todos n
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
