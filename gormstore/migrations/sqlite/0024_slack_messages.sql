CREATE TABLE slack_messages (
  target TEXT NOT NULL,
  run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  channel TEXT NOT NULL DEFAULT '',
  ts TEXT NOT NULL DEFAULT '',
  created_at DATETIME NOT NULL,
  PRIMARY KEY (target, run_id, tool_call_id)
)
