CREATE TABLE saved_views (
  id TEXT NOT NULL PRIMARY KEY,
  subject TEXT NOT NULL,
  name TEXT NOT NULL,
  query TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
CREATE UNIQUE INDEX idx_saved_views_name ON saved_views (subject, name)
