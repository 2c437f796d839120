-- The Cloudflare Access identity an endpoint answers for: the email of a person,
-- or the client id (common_name) of a service token, lower-cased. A request to /mcp
-- whose verified Access assertion names it acts as this endpoint. NULL: none. Two
-- live endpoints never share one; a revoked endpoint's identity is free again.
ALTER TABLE endpoints ADD COLUMN cf_access_identity TEXT;
CREATE UNIQUE INDEX endpoints_cf_access_identity ON endpoints(cf_access_identity)
    WHERE cf_access_identity IS NOT NULL AND revoked_at IS NULL;
