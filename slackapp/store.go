package slackapp

import (
	"context"
	"time"
)

// Message is the Slack message posted for one waiting call: where it is, to update it.
type Message struct {
	Channel string
	TS      string
}

// Store records the message posted per call and target, implemented in gormstore (table
// slack_messages), so that every instance updates that one message and none posts a second.
type Store interface {
	// ReserveSlackMessage claims the posting of the call's message for target: true when the
	// caller is to post it, false when another attempt (of any instance) posted it or is posting
	// it. A reservation left without a message for longer than stale (its instance died
	// between reserving and posting) may be taken over.
	ReserveSlackMessage(ctx context.Context, target, runID, toolCallID string, stale time.Duration) (bool, error)
	// SetSlackMessage records where the reserved message was posted.
	SetSlackMessage(ctx context.Context, target, runID, toolCallID string, m Message) error
	// ReleaseSlackMessage gives up a reservation whose post failed, so that a retry posts.
	ReleaseSlackMessage(ctx context.Context, target, runID, toolCallID string) error
	// SlackMessage returns the call's posted message for target, nil when none was posted.
	SlackMessage(ctx context.Context, target, runID, toolCallID string) (*Message, error)
}
