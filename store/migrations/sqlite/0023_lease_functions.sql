-- PostgreSQL's twin moves the parts of its claim and complete statements that
-- only some runs need (reservations, keys) into functions, so that a run sets
-- up only what it uses. SQLite's claims and completes are statements of their
-- own in one transaction.
SELECT 1;
