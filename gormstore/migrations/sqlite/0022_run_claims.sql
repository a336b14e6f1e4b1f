CREATE TABLE run_claims (
  run_id TEXT NOT NULL,
  subject TEXT NOT NULL,
  claimed_at DATETIME NOT NULL,
  expires_at DATETIME NOT NULL,
  PRIMARY KEY (run_id, subject)
);
CREATE INDEX idx_run_claims_expiry ON run_claims (expires_at)
