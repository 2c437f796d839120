-- PostgreSQL twin of sqlite/0011_tool_definitions.sql.
ALTER TABLE tool_pins ADD COLUMN definition TEXT;
ALTER TABLE tool_pins ADD COLUMN pending_definition TEXT;
