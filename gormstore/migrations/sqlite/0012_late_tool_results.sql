CREATE TABLE late_tool_results (
  run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  result TEXT,
  error TEXT,
  instance_id TEXT NOT NULL,
  finished_at DATETIME NOT NULL,
  recorded_at DATETIME NOT NULL,
  PRIMARY KEY (run_id, tool_call_id)
);
ALTER TABLE run_tool_calls ADD COLUMN interrupted_tool_call_id TEXT
