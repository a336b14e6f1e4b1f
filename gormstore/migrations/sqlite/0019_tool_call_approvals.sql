CREATE TABLE tool_call_approvals (
  run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  round INTEGER NOT NULL,
  subject TEXT NOT NULL,
  args_digest TEXT NOT NULL,
  edited_args TEXT,
  approved_at DATETIME NOT NULL,
  PRIMARY KEY (run_id, tool_call_id, round, subject)
);
ALTER TABLE run_tool_calls ADD COLUMN approvals INTEGER NOT NULL DEFAULT 0
