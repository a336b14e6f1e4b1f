CREATE INDEX idx_messages_resource ON messages (resource_id, thread_id)
