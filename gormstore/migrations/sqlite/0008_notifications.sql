CREATE TABLE notifications (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  target TEXT NOT NULL,
  kind TEXT NOT NULL,
  run_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at DATETIME NOT NULL,
  lease_owner TEXT,
  lease_until DATETIME,
  last_error TEXT,
  created_at DATETIME NOT NULL,
  delivered_at DATETIME
);
CREATE UNIQUE INDEX idx_notifications_event_target ON notifications (event_id, target);
CREATE INDEX idx_notifications_due ON notifications (state, next_attempt_at)
