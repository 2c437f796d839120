-- A delivery whose provider does not sign its delivery id (GitHub's, the generic
-- X-Delivery-Id) or sends none (a Slack slash command, a Stripe body without "id")
-- is deduplicated on what the provider does sign: replay_key is the SHA-256 of
-- those signed bytes (the body, or the timestamp and the body). NULL where the
-- delivery id is signed and so is the key itself, and for GitLab's token, which
-- signs nothing. The key lives and goes with its event, so it costs 32 bytes per
-- kept event and no second write.
ALTER TABLE webhook_events ADD COLUMN replay_key BLOB;
CREATE UNIQUE INDEX webhook_events_replay ON webhook_events(webhook_id, replay_key) WHERE replay_key IS NOT NULL;
