CREATE TABLE tool_call_approvals (
  run_id VARCHAR(36) NOT NULL,
  tool_call_id VARCHAR(191) NOT NULL,
  round BIGINT NOT NULL,
  subject VARCHAR(191) NOT NULL,
  args_digest VARCHAR(80) NOT NULL,
  edited_args LONGTEXT NULL,
  approved_at DATETIME(3) NOT NULL,
  PRIMARY KEY (run_id, tool_call_id, round, subject)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE run_tool_calls ADD COLUMN approvals BIGINT NOT NULL DEFAULT 0
