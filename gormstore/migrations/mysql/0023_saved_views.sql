CREATE TABLE saved_views (
  id VARCHAR(36) NOT NULL PRIMARY KEY,
  subject VARCHAR(191) NOT NULL,
  name VARCHAR(191) NOT NULL,
  query TEXT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  UNIQUE KEY idx_saved_views_name (subject, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
