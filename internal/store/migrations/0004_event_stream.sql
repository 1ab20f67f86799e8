-- The tenant event stream: an event's published type (empty: it stays in
-- its sandbox's own log) and its sandbox's metadata at the time (JSON).
-- Events recorded before this migration are not published.
ALTER TABLE events ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN metadata TEXT NOT NULL DEFAULT '';
CREATE INDEX events_tenant_published ON events (tenant, seq) WHERE kind != '';
