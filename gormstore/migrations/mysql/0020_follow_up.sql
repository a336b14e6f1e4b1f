ALTER TABLE run_tool_calls ADD COLUMN remind_at DATETIME(3) NULL, ADD COLUMN reminded_at DATETIME(3) NULL, ADD COLUMN escalate_at DATETIME(3) NULL, ADD COLUMN escalated_at DATETIME(3) NULL, ADD COLUMN escalate_to TEXT NULL, ADD COLUMN expiring_at DATETIME(3) NULL, ADD COLUMN expiring_warned_at DATETIME(3) NULL;
CREATE INDEX idx_tool_calls_remind ON run_tool_calls (state, remind_at);
CREATE INDEX idx_tool_calls_escalate ON run_tool_calls (state, escalate_at);
CREATE INDEX idx_tool_calls_expiring ON run_tool_calls (state, expiring_at)
