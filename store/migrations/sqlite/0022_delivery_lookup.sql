-- PostgreSQL's twin adds functions that find a delivery's first event by its
-- key's unique index whatever the statistics say. SQLite's planner picks those
-- indexes for the lookup's equalities.
SELECT 1;
