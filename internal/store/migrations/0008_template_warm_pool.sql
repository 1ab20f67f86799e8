-- A template's warm pool: how many sandboxes of it are kept started.
ALTER TABLE templates ADD COLUMN warm_pool INTEGER NOT NULL DEFAULT 0;
