-- MCP authorization (OAuth 2.1): Switchboard is the authorization server of its own
-- /mcp. A grant is one client's consent, given by an operator, to act as one
-- endpoint: its tokens are exactly as limited as that endpoint's bearer. Codes and
-- tokens are kept only as SHA-256 hashes. Times are Unix milliseconds.

-- Clients that registered themselves (RFC 7591). A client identified by the URL of
-- its metadata document is not kept here: its document is fetched when it asks.
CREATE TABLE oauth_clients (
    client_id     TEXT    PRIMARY KEY,
    client_name   TEXT    NOT NULL,
    redirect_uris TEXT    NOT NULL, -- JSON array of exact URIs
    created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX oauth_clients_created ON oauth_clients(created_at);

-- One consent: the token family of one client on one endpoint. Revoking it (or the
-- endpoint) ends every code and token of it.
CREATE TABLE oauth_grants (
    id           INTEGER PRIMARY KEY,
    endpoint_id  INTEGER NOT NULL REFERENCES endpoints(id),
    client_id    TEXT    NOT NULL,
    client_name  TEXT    NOT NULL,
    redirect_uri TEXT    NOT NULL,
    verified     INTEGER NOT NULL DEFAULT 0, -- the client's metadata document was fetched
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX oauth_grants_endpoint ON oauth_grants(endpoint_id);

-- Authorization codes: one use, a short life, bound to the PKCE challenge and the
-- redirect URI they were issued for.
CREATE TABLE oauth_codes (
    code_hash      BLOB    PRIMARY KEY,
    grant_id       INTEGER NOT NULL REFERENCES oauth_grants(id),
    code_challenge TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER
) STRICT;

-- Access and refresh tokens. A refresh token is used once: refreshing marks it
-- used, and a used one presented again revokes its grant (a stolen copy).
CREATE TABLE oauth_tokens (
    token_hash BLOB    PRIMARY KEY,
    grant_id   INTEGER NOT NULL REFERENCES oauth_grants(id),
    kind       TEXT    NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    revoked_at INTEGER
) STRICT;
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);
