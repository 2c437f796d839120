-- PostgreSQL twin of sqlite/0012_charts.sql.
CREATE TABLE queue_minutes (
    queue          TEXT   NOT NULL,
    minute         BIGINT NOT NULL,
    added          BIGINT NOT NULL DEFAULT 0,
    completed      BIGINT NOT NULL DEFAULT 0,
    failed         BIGINT NOT NULL DEFAULT 0,
    depth          BIGINT NOT NULL DEFAULT 0,
    oldest_wait_ms BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute)
);
CREATE INDEX queue_minutes_minute ON queue_minutes(minute);

CREATE TABLE webhook_minutes (
    webhook_id BIGINT NOT NULL,
    minute     BIGINT NOT NULL,
    deliveries BIGINT NOT NULL DEFAULT 0,
    refusals   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (webhook_id, minute)
);
CREATE INDEX webhook_minutes_minute ON webhook_minutes(minute);
