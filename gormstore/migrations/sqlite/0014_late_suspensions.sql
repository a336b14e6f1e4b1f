ALTER TABLE late_tool_results ADD COLUMN suspend_payload TEXT NULL
