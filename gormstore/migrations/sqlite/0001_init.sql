CREATE TABLE agent_runs (
  id TEXT NOT NULL PRIMARY KEY,
  agent_id TEXT NOT NULL,
  parent_run_id TEXT,
  thread_id TEXT,
  resource_id TEXT,
  prompt TEXT NOT NULL,
  require_tool_approval BOOLEAN NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  snapshot TEXT,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  suspended_at DATETIME,
  last_seq INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT,
  lease_until DATETIME,
  version INTEGER NOT NULL DEFAULT 0,
  output TEXT,
  error TEXT
);
CREATE INDEX idx_runs_status_parent ON agent_runs (status, parent_run_id, created_at, id);
CREATE INDEX idx_runs_status_agent ON agent_runs (status, agent_id, created_at, id);
CREATE INDEX idx_runs_status_thread ON agent_runs (status, thread_id, created_at, id);
CREATE INDEX idx_runs_status_resource ON agent_runs (status, resource_id, created_at, id);
CREATE INDEX idx_runs_lease ON agent_runs (status, lease_until);
CREATE TABLE run_tool_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  args TEXT,
  requires_approval BOOLEAN NOT NULL,
  suspend_payload TEXT,
  interrupted BOOLEAN NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  created_at DATETIME NOT NULL,
  decided_by TEXT,
  decided_at DATETIME,
  reason TEXT,
  resume_data TEXT
);
CREATE INDEX idx_tool_calls_run ON run_tool_calls (run_id, state);
CREATE TABLE run_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at DATETIME NOT NULL,
  PRIMARY KEY (run_id, seq)
);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL,
  resource_id TEXT,
  run_id TEXT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
CREATE INDEX idx_messages_thread ON messages (thread_id, id);
