CREATE TABLE suspended_counts (
  agent_id VARBINARY(764) NOT NULL,
  top_level BOOLEAN NOT NULL,
  day INT NOT NULL,
  slot INT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (agent_id, top_level, day, slot),
  KEY idx_suspended_counts_day (top_level, day)
) ENGINE=InnoDB;
INSERT INTO suspended_counts (agent_id, top_level, day, slot, n)
  SELECT CAST(agent_id AS BINARY), parent_run_id IS NULL, DATEDIFF(created_at, '1970-01-01'), 0, COUNT(*) FROM agent_runs WHERE status = 'SUSPENDED'
  GROUP BY CAST(agent_id AS BINARY), parent_run_id IS NULL, DATEDIFF(created_at, '1970-01-01')
