-- Secrets a tenant keeps for its sandboxes to fetch on demand (values are
-- write-only through the API).
CREATE TABLE secrets (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
);
