-- Webhook subscriptions: cursor is the event log position up to which
-- deliveries were made.
CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    url         TEXT NOT NULL,
    types       TEXT NOT NULL,
    secret      TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    cursor      INTEGER NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant, created_at);

-- The outbox: one row per event and subscription (event_seq 0: a test
-- ping), the body fixed when the row is made.
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id   TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_seq    INTEGER NOT NULL,
    event_id     TEXT NOT NULL,
    event_type   TEXT NOT NULL,
    body         BLOB NOT NULL,
    state        TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_status  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT '',
    next_at      INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    delivered_at INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_seq) WHERE event_seq > 0;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);
