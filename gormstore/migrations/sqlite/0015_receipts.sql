CREATE TABLE receipt_keys (
  generation INTEGER NOT NULL PRIMARY KEY,
  kid TEXT NOT NULL,
  private_key TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
ALTER TABLE run_tool_calls ADD COLUMN receipt TEXT
