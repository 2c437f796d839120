-- Minute-by-minute history for the board's charts. serve's chart sampler writes one
-- row per queue and per webhook that had anything to show in the minute (minute is
-- the minute's start, Unix ms); the reaper deletes rows older than ChartHistory, so
-- the tables stay at about 1,500 rows per queue and per webhook.
CREATE TABLE queue_minutes (
    queue          TEXT    NOT NULL,
    minute         INTEGER NOT NULL,
    added          INTEGER NOT NULL DEFAULT 0,
    completed      INTEGER NOT NULL DEFAULT 0,
    failed         INTEGER NOT NULL DEFAULT 0, -- attempts that failed: fail, or a lease run out
    depth          INTEGER NOT NULL DEFAULT 0, -- pending todos at the minute's end
    oldest_wait_ms INTEGER NOT NULL DEFAULT 0, -- how long the head had been claimable then
    PRIMARY KEY (queue, minute)
) STRICT, WITHOUT ROWID;
-- The all-queues chart and pruning read by minute.
CREATE INDEX queue_minutes_minute ON queue_minutes(minute);

CREATE TABLE webhook_minutes (
    webhook_id INTEGER NOT NULL,
    minute     INTEGER NOT NULL,
    deliveries INTEGER NOT NULL DEFAULT 0, -- deliveries stored
    refusals   INTEGER NOT NULL DEFAULT 0, -- deliveries refused (signature, rate limit)
    PRIMARY KEY (webhook_id, minute)
) STRICT, WITHOUT ROWID;
CREATE INDEX webhook_minutes_minute ON webhook_minutes(minute);
