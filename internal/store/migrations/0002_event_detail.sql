-- Structured detail of an event (JSON), such as an egress decision.
ALTER TABLE events ADD COLUMN detail TEXT NOT NULL DEFAULT '';
