-- PostgreSQL twin of sqlite/0020_login_throttle_bound.sql.
CREATE INDEX login_throttle_last ON login_throttle (last_at);
