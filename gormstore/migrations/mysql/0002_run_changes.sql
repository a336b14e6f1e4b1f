CREATE TABLE run_changes (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  run_id VARCHAR(36) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  instance_id VARCHAR(64) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_run_changes_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX idx_runs_finished ON agent_runs (status, updated_at);
