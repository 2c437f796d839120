-- The board's Failed tab lists dead letters by when they failed, newest first: a
-- todo added long ago that failed a minute ago (a retry that failed again) is at
-- the top, not deep among the ids. These two keep that a short index walk, over
-- every queue and over one; they hold failed todos only, so claims and completions
-- never write to them.
UPDATE todos SET finished_at = updated_at WHERE state = 'failed' AND finished_at IS NULL;
CREATE INDEX todos_failed_at ON todos(finished_at, id) WHERE state = 'failed';
CREATE INDEX todos_failed_queue_at ON todos(queue, finished_at, id) WHERE state = 'failed';
