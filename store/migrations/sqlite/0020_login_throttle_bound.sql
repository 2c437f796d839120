-- The login throttle's rows are pruned by the time of their last failure: on
-- every count (the forgotten ones) and on the reaper's pass (all but the newest
-- LoginThrottleRows). The index makes both read only the rows they delete.
CREATE INDEX login_throttle_last ON login_throttle (last_at);
