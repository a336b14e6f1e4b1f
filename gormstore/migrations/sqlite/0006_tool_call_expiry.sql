ALTER TABLE run_tool_calls ADD COLUMN expires_at DATETIME;
CREATE INDEX idx_tool_calls_due ON run_tool_calls (state, expires_at)
