CREATE TABLE suspended_counts (
  agent_id TEXT NOT NULL,
  top_level BOOLEAN NOT NULL,
  slot INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (agent_id, top_level, slot)
);
INSERT INTO suspended_counts (agent_id, top_level, slot, n)
  SELECT agent_id, parent_run_id IS NULL, 0, COUNT(*) FROM agent_runs WHERE status = 'SUSPENDED'
  GROUP BY agent_id, parent_run_id IS NULL
