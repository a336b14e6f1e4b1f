CREATE TABLE grants (
  id VARCHAR(36) NOT NULL,
  agent_id VARCHAR(191) NOT NULL,
  tool_name VARCHAR(191) NOT NULL,
  scope VARCHAR(16) NOT NULL,
  scope_value VARCHAR(191) NULL,
  resource_id VARCHAR(191) NULL,
  args_match LONGTEXT NULL,
  expires_at DATETIME(3) NULL,
  max_uses BIGINT NULL,
  uses BIGINT NOT NULL DEFAULT 0,
  created_by VARCHAR(191) NULL,
  creator_roles TEXT NOT NULL,
  creator_resources TEXT NULL,
  created_at DATETIME(3) NOT NULL,
  from_run_id VARCHAR(36) NOT NULL,
  from_tool_call_id VARCHAR(191) NOT NULL,
  revoked_at DATETIME(3) NULL,
  revoked_by VARCHAR(191) NULL,
  PRIMARY KEY (id),
  KEY idx_grants_tool (agent_id, tool_name, revoked_at),
  KEY idx_grants_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE run_tool_calls ADD COLUMN grant_id VARCHAR(36) NULL
