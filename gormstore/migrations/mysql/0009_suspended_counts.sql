CREATE TABLE suspended_counts (
  agent_id VARBINARY(764) NOT NULL,
  top_level BOOLEAN NOT NULL,
  slot INT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (agent_id, top_level, slot)
) ENGINE=InnoDB;
INSERT INTO suspended_counts (agent_id, top_level, slot, n)
  SELECT CAST(agent_id AS BINARY), parent_run_id IS NULL, 0, COUNT(*) FROM agent_runs WHERE status = 'SUSPENDED'
  GROUP BY CAST(agent_id AS BINARY), parent_run_id IS NULL
