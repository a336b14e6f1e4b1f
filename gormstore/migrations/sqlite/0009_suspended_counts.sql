CREATE TABLE suspended_counts (
  agent_id TEXT NOT NULL,
  top_level BOOLEAN NOT NULL,
  day INTEGER NOT NULL,
  slot INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (agent_id, top_level, day, slot)
);
CREATE INDEX idx_suspended_counts_day ON suspended_counts (top_level, day);
INSERT INTO suspended_counts (agent_id, top_level, day, slot, n)
  SELECT agent_id, parent_run_id IS NULL, CAST(strftime('%s', created_at) AS INTEGER) / 86400, 0, COUNT(*) FROM agent_runs WHERE status = 'SUSPENDED'
  GROUP BY agent_id, parent_run_id IS NULL, CAST(strftime('%s', created_at) AS INTEGER) / 86400
