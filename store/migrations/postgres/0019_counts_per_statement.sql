-- queue_counts kept per statement, not per todo. 0006's row triggers changed a
-- (queue, state) row once per todo, twice per move; a statement that claims or
-- completes many todos at once (store/leases_sets_pg.go) paid that for each of
-- them. These statement triggers read the statement's rows from its transition
-- tables and change each (queue, state) row once, by the sum, in the statement's
-- own transaction, so the counts stay exact. In key order, so that two
-- transactions never lock two rows in opposite orders. PostgreSQL allows no
-- column list (UPDATE OF) on a trigger with transition tables: an update that
-- moves no todo sums to nothing and writes nothing.
DROP TRIGGER todos_count_insert ON todos;
DROP TRIGGER todos_count_delete ON todos;
DROP TRIGGER todos_count_update ON todos;
DROP FUNCTION todos_count();

-- Todos added (INSERT) or removed (DELETE): the trigger names its rows todos_in.
CREATE FUNCTION todos_count_in_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queue_counts (queue, state, n)
        SELECT queue, state, CASE WHEN TG_OP = 'INSERT' THEN count(*) ELSE -count(*) END
        FROM todos_in GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state) DO UPDATE SET n = queue_counts.n + excluded.n;
    RETURN NULL;
END;
$$;

CREATE FUNCTION todos_count_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queue_counts (queue, state, n)
        SELECT queue, state, sum(d) FROM (
            SELECT queue, state, -1 AS d FROM before_rows
            UNION ALL SELECT queue, state, 1 FROM after_rows) moved
        GROUP BY queue, state HAVING sum(d) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state) DO UPDATE SET n = queue_counts.n + excluded.n;
    RETURN NULL;
END;
$$;

CREATE TRIGGER todos_count_insert AFTER INSERT ON todos REFERENCING NEW TABLE AS todos_in
    FOR EACH STATEMENT EXECUTE FUNCTION todos_count_in_out();
CREATE TRIGGER todos_count_delete AFTER DELETE ON todos REFERENCING OLD TABLE AS todos_in
    FOR EACH STATEMENT EXECUTE FUNCTION todos_count_in_out();
CREATE TRIGGER todos_count_update AFTER UPDATE ON todos REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows
    FOR EACH STATEMENT EXECUTE FUNCTION todos_count_moved();
