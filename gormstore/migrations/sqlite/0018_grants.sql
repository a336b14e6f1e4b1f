CREATE TABLE grants (
  id TEXT NOT NULL PRIMARY KEY,
  agent_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  scope TEXT NOT NULL,
  scope_value TEXT,
  resource_id TEXT,
  args_match TEXT,
  expires_at DATETIME,
  max_uses INTEGER,
  uses INTEGER NOT NULL DEFAULT 0,
  created_by TEXT,
  creator_roles TEXT NOT NULL,
  creator_resources TEXT,
  created_at DATETIME NOT NULL,
  from_run_id TEXT NOT NULL,
  from_tool_call_id TEXT NOT NULL,
  revoked_at DATETIME,
  revoked_by TEXT
);
CREATE INDEX idx_grants_tool ON grants (agent_id, tool_name, revoked_at);
CREATE INDEX idx_grants_created ON grants (created_at);
ALTER TABLE run_tool_calls ADD COLUMN grant_id TEXT
