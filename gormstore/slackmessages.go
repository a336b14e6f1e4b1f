package gormstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/slackapp"
)

// SlackMessage is one row of slack_messages: the Slack message posted for one waiting call and
// slack-app webhook (package slackapp). Its key makes the post happen once across instances:
// the row is inserted (reserved) before the post, and its channel and ts recorded after.
type SlackMessage struct {
	Target     string    `gorm:"column:target;primaryKey"`
	RunID      string    `gorm:"column:run_id;primaryKey"`
	ToolCallID string    `gorm:"column:tool_call_id;primaryKey"`
	Channel    string    `gorm:"column:channel"`
	TS         string    `gorm:"column:ts"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (SlackMessage) TableName() string { return "slack_messages" }

var _ slackapp.Store = (*Store)(nil)

func slackKey(q *gorm.DB, target, runID, toolCallID string) *gorm.DB {
	return q.Where("target = ? AND run_id = ? AND tool_call_id = ?", target, runID, toolCallID)
}

// ReserveSlackMessage implements slackapp.Store: an insert, which the primary key lets one
// caller make; a reservation older than stale without a message is taken over by a
// compare-and-set on its created_at.
func (s *Store) ReserveSlackMessage(ctx context.Context, target, runID, toolCallID string, stale time.Duration) (bool, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := s.db.WithContext(ctx).Create(&SlackMessage{Target: target, RunID: runID, ToolCallID: toolCallID, CreatedAt: now}).Error
	if err == nil {
		return true, nil
	}
	if !duplicateKey(err) {
		return false, fmt.Errorf("reserve slack message: %w", err)
	}
	res := slackKey(s.db.WithContext(ctx).Model(&SlackMessage{}), target, runID, toolCallID).
		Where("ts = '' AND created_at < ?", now.Add(-stale)).Update("created_at", now)
	if res.Error != nil {
		return false, fmt.Errorf("take over slack message: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// SetSlackMessage implements slackapp.Store.
func (s *Store) SetSlackMessage(ctx context.Context, target, runID, toolCallID string, m slackapp.Message) error {
	err := slackKey(s.db.WithContext(ctx).Model(&SlackMessage{}), target, runID, toolCallID).
		Updates(map[string]any{"channel": m.Channel, "ts": m.TS}).Error
	if err != nil {
		return fmt.Errorf("record slack message: %w", err)
	}
	return nil
}

// ReleaseSlackMessage implements slackapp.Store.
func (s *Store) ReleaseSlackMessage(ctx context.Context, target, runID, toolCallID string) error {
	if err := slackKey(s.db.WithContext(ctx), target, runID, toolCallID).Where("ts = ''").Delete(&SlackMessage{}).Error; err != nil {
		return fmt.Errorf("release slack message: %w", err)
	}
	return nil
}

// SlackMessage implements slackapp.Store.
func (s *Store) SlackMessage(ctx context.Context, target, runID, toolCallID string) (*slackapp.Message, error) {
	var row SlackMessage
	err := slackKey(s.db.WithContext(ctx), target, runID, toolCallID).Where("ts <> ''").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read slack message: %w", err)
	}
	return &slackapp.Message{Channel: row.Channel, TS: row.TS}, nil
}
