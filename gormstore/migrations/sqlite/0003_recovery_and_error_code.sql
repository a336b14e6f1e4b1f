ALTER TABLE agent_runs ADD COLUMN error_code TEXT NULL;
ALTER TABLE agent_runs ADD COLUMN recovery_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_runs ADD COLUMN recover_after DATETIME NULL;
DROP INDEX IF EXISTS idx_runs_lease;
CREATE INDEX idx_runs_lease ON agent_runs (status, lease_until, id)
