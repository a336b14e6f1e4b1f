CREATE TABLE threads (
  id VARBINARY(764) NOT NULL PRIMARY KEY,
  resource_id VARCHAR(191) NULL,
  created_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO threads (id, resource_id, created_at)
  SELECT CAST(thread_id AS BINARY), resource_id, created_at FROM (
    SELECT thread_id, resource_id, created_at,
      ROW_NUMBER() OVER (PARTITION BY CAST(thread_id AS BINARY) ORDER BY created_at, src, run_id, msg_id) AS n
    FROM (
      SELECT thread_id, resource_id, created_at, 0 AS src, id AS run_id, 0 AS msg_id FROM agent_runs WHERE thread_id IS NOT NULL
      UNION ALL
      SELECT thread_id, resource_id, created_at, 1, '', id FROM messages
    ) used
  ) ranked
  WHERE n = 1
