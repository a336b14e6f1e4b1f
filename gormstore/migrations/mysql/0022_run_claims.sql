CREATE TABLE run_claims (
  run_id VARCHAR(36) NOT NULL,
  subject VARCHAR(191) NOT NULL,
  claimed_at DATETIME(3) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (run_id, subject),
  KEY idx_run_claims_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
