ALTER TABLE agent_runs ADD COLUMN started_by TEXT NULL
