-- A withheld module tool is reviewed against the definition that was approved: the
-- pin keeps that definition beside its hash (and the pending one beside its hash),
-- as the gateway lists it, keys sorted and indented, so the board and the CLI can
-- show what changed. Pins made before this keep only their hash (NULL here).
ALTER TABLE tool_pins ADD COLUMN definition TEXT;
ALTER TABLE tool_pins ADD COLUMN pending_definition TEXT;
