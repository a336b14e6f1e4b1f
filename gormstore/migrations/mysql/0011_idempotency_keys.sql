CREATE TABLE idempotency_keys (
  key_hash CHAR(64) NOT NULL PRIMARY KEY,
  run_id VARCHAR(36) NOT NULL,
  request_hash CHAR(64) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_idempotency_keys_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
