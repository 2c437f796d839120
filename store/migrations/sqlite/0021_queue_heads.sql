-- PostgreSQL's twin adds functions that read a queue's heads through
-- todos_ready whatever its statistics say. SQLite names the index in the
-- statement (INDEXED BY todos_ready).
SELECT 1;
