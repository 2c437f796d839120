-- PostgreSQL's twin has todos_free_keys set the freed todo's available_at to
-- when its key was freed. SQLite frees keys in Go (keyEnded).
SELECT 1;
