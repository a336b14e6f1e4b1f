CREATE TABLE idempotency_keys (
  key_hash TEXT NOT NULL PRIMARY KEY,
  run_id TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
CREATE INDEX idx_idempotency_keys_run ON idempotency_keys (run_id)
