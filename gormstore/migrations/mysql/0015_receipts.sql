CREATE TABLE receipt_keys (
  generation BIGINT NOT NULL,
  kid VARCHAR(64) NOT NULL,
  private_key VARCHAR(64) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (generation)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE run_tool_calls ADD COLUMN receipt TEXT NULL
