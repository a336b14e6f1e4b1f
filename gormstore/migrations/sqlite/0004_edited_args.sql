ALTER TABLE run_tool_calls ADD COLUMN edited_args TEXT
