ALTER TABLE run_tool_calls ADD COLUMN resume_schema TEXT
