CREATE TABLE run_changes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
CREATE INDEX idx_run_changes_created ON run_changes (created_at);
CREATE INDEX idx_runs_finished ON agent_runs (status, updated_at);
