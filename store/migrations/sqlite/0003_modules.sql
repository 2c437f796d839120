-- Tool-definition pins (OWASP MCP03, "rug pull"). hash is the SHA-256 of a module
-- tool's definition as first seen, or as a human last approved it. pending_hash is a
-- changed definition the gateway withholds from agents until a human approves it;
-- approving pins it. Tool names are the exposed, prefixed names. Times are Unix ms.
CREATE TABLE tool_pins (
    module       TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    hash         TEXT    NOT NULL,
    pending_hash TEXT,
    pinned_at    INTEGER NOT NULL,
    pending_at   INTEGER,
    PRIMARY KEY (module, tool)
) STRICT;
