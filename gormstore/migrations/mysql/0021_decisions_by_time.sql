CREATE INDEX idx_tool_calls_decided ON run_tool_calls (decided_at, id)
