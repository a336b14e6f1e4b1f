CREATE TABLE late_tool_results (
  run_id VARCHAR(36) NOT NULL,
  tool_call_id VARCHAR(191) NOT NULL,
  tool_name VARCHAR(191) NOT NULL,
  result LONGTEXT NULL,
  error LONGTEXT NULL,
  instance_id VARCHAR(191) NOT NULL,
  finished_at DATETIME(3) NOT NULL,
  recorded_at DATETIME(3) NOT NULL,
  PRIMARY KEY (run_id, tool_call_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE run_tool_calls ADD COLUMN interrupted_tool_call_id VARCHAR(191) NULL
