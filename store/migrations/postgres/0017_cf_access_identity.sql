-- PostgreSQL twin of sqlite/0017_cf_access_identity.sql.
ALTER TABLE endpoints ADD COLUMN cf_access_identity TEXT;
CREATE UNIQUE INDEX endpoints_cf_access_identity ON endpoints(cf_access_identity)
    WHERE cf_access_identity IS NOT NULL AND revoked_at IS NULL;
