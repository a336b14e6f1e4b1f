ALTER TABLE run_tool_calls
  ADD COLUMN approval_reason TEXT NULL,
  ADD COLUMN policy_revision VARCHAR(80) NULL
