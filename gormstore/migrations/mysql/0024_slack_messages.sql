CREATE TABLE slack_messages (
  target VARCHAR(191) NOT NULL,
  run_id VARCHAR(36) NOT NULL,
  tool_call_id VARCHAR(191) NOT NULL,
  channel VARCHAR(64) NOT NULL DEFAULT '',
  ts VARCHAR(32) NOT NULL DEFAULT '',
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (target, run_id, tool_call_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
