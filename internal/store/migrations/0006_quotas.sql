-- Tenants' quota overrides (JSON in the API's form; a field left out
-- takes the server's default).
CREATE TABLE quotas (
    tenant     TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
