ALTER TABLE run_tool_calls ADD COLUMN approval_reason TEXT;
ALTER TABLE run_tool_calls ADD COLUMN policy_revision TEXT
