-- Sandboxes: one row per sandbox, written before the backend object exists.
CREATE TABLE sandboxes (
    id                 TEXT PRIMARY KEY,
    tenant             TEXT NOT NULL,
    state              TEXT NOT NULL,
    reason             TEXT NOT NULL DEFAULT '',
    message            TEXT NOT NULL DEFAULT '',
    last_transition_at INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    expires_at         INTEGER,
    driver             TEXT NOT NULL,
    image_uri          TEXT,
    snapshot_id        TEXT,
    platform_os        TEXT,
    platform_arch      TEXT,
    entrypoint         TEXT NOT NULL,
    metadata           TEXT NOT NULL,
    resources          TEXT NOT NULL,
    extensions         TEXT NOT NULL,
    network_policy     TEXT,
    handle             TEXT,
    execd_token        TEXT NOT NULL,
    egress_token       TEXT NOT NULL
);
CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant, created_at DESC);

-- Idempotency keys of creates, per tenant.
CREATE TABLE idempotency_keys (
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    sandbox_id   TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
);

-- API keys; only a SHA-256 of the key is stored.
CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    hash       TEXT NOT NULL UNIQUE,
    prefix     TEXT NOT NULL,
    admin      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

-- Snapshots of sandboxes.
CREATE TABLE snapshots (
    id                 TEXT PRIMARY KEY,
    tenant             TEXT NOT NULL,
    sandbox_id         TEXT NOT NULL,
    name               TEXT NOT NULL DEFAULT '',
    state              TEXT NOT NULL,
    reason             TEXT NOT NULL DEFAULT '',
    message            TEXT NOT NULL DEFAULT '',
    last_transition_at INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    driver             TEXT NOT NULL,
    ref                TEXT
);

-- The event log: every lifecycle transition, in order. It doubles as an
-- outbox for webhooks.
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    type       TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT '',
    reason     TEXT NOT NULL DEFAULT '',
    message    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_sandbox ON events (sandbox_id, seq);
