ALTER TABLE agent_runs
  ADD COLUMN error_code VARCHAR(32) NULL,
  ADD COLUMN recovery_attempts INT NOT NULL DEFAULT 0,
  ADD COLUMN recover_after DATETIME(3) NULL;
DROP INDEX idx_runs_lease ON agent_runs;
CREATE INDEX idx_runs_lease ON agent_runs (status, lease_until, id)
