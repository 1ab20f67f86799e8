-- Sandbox templates: named create presets of a tenant, or public ones
-- (tenant '').
CREATE TABLE templates (
    tenant         TEXT NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    spec           TEXT NOT NULL,
    allow_override TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
);
