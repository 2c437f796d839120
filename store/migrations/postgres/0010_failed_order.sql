-- PostgreSQL twin of sqlite/0010_failed_order.sql.
UPDATE todos SET finished_at = updated_at WHERE state = 'failed' AND finished_at IS NULL;
CREATE INDEX todos_failed_at ON todos(finished_at, id) WHERE state = 'failed';
CREATE INDEX todos_failed_queue_at ON todos(queue, finished_at, id) WHERE state = 'failed';
