CREATE TABLE agent_runs (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  agent_id VARCHAR(191) NOT NULL,
  parent_run_id VARCHAR(36) NULL,
  thread_id VARCHAR(191) NULL,
  resource_id VARCHAR(191) NULL,
  prompt LONGTEXT NOT NULL,
  require_tool_approval BOOLEAN NOT NULL DEFAULT FALSE,
  status VARCHAR(16) NOT NULL,
  snapshot LONGTEXT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  suspended_at DATETIME(3) NULL,
  last_seq BIGINT NOT NULL DEFAULT 0,
  lease_owner VARCHAR(64) NULL,
  lease_until DATETIME(3) NULL,
  version BIGINT NOT NULL DEFAULT 0,
  output LONGTEXT NULL,
  error LONGTEXT NULL,
  KEY idx_runs_status_parent (status, parent_run_id, created_at, id),
  KEY idx_runs_status_agent (status, agent_id, created_at, id),
  KEY idx_runs_status_thread (status, thread_id, created_at, id),
  KEY idx_runs_status_resource (status, resource_id, created_at, id),
  KEY idx_runs_lease (status, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE run_tool_calls (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  run_id VARCHAR(36) NOT NULL,
  tool_call_id VARCHAR(191) NOT NULL,
  tool_name VARCHAR(191) NOT NULL,
  args LONGTEXT NULL,
  requires_approval BOOLEAN NOT NULL,
  suspend_payload LONGTEXT NULL,
  interrupted BOOLEAN NOT NULL DEFAULT FALSE,
  state VARCHAR(16) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  decided_by VARCHAR(191) NULL,
  decided_at DATETIME(3) NULL,
  reason LONGTEXT NULL,
  resume_data LONGTEXT NULL,
  KEY idx_tool_calls_run (run_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE run_events (
  run_id VARCHAR(36) NOT NULL,
  seq BIGINT NOT NULL,
  type VARCHAR(32) NOT NULL,
  data LONGTEXT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (run_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE messages (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  thread_id VARCHAR(191) NOT NULL,
  resource_id VARCHAR(191) NULL,
  run_id VARCHAR(36) NOT NULL,
  role VARCHAR(16) NOT NULL,
  content LONGTEXT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_messages_thread (thread_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
