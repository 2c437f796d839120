-- PostgreSQL's twin keeps queue_counts with statement triggers (transition
-- tables). SQLite has no statement triggers; its row triggers of 0006 stay, and
-- its single writer makes each of their changes cheap.
SELECT 1;
