CREATE TABLE threads (
  id TEXT NOT NULL PRIMARY KEY,
  resource_id TEXT,
  created_at DATETIME NOT NULL
);
INSERT INTO threads (id, resource_id, created_at)
  SELECT thread_id, resource_id, created_at FROM (
    SELECT thread_id, resource_id, created_at,
      ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY created_at, src, run_id, msg_id) AS n
    FROM (
      SELECT thread_id, resource_id, created_at, 0 AS src, id AS run_id, 0 AS msg_id FROM agent_runs WHERE thread_id IS NOT NULL
      UNION ALL
      SELECT thread_id, resource_id, created_at, 1, '', id FROM messages
    ) used
  ) ranked
  WHERE n = 1
