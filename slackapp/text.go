package slackapp

import (
	"fmt"

	"github.com/slack-go/slack"

	"interlock/notify"
	"interlock/runtype"
)

// Action ids of the message's buttons and the decline modal's callback and input.
const (
	actionApprove   = "interlock_approve"
	actionDecline   = "interlock_decline"
	actionOpen      = "interlock_open"
	callbackDecline = "interlock_decline_reason"
	blockReason     = "reason"
	inputReason     = "reason"
)

// toolText is the call's tool as text of the server's sentence (notify.SlackText).
func toolText(e notify.Event) string {
	if e.ToolCall == nil {
		return "a tool call"
	}
	return "`" + notify.SlackText(e.ToolCall.ToolName) + "`"
}

// waitingText is the waiting call's message as plain text (notifications, screen readers).
func waitingText(e notify.Event) string {
	what := "approval"
	if e.WaitsFor == "input" {
		what = "input"
	}
	return fmt.Sprintf(":raising_hand: %s of agent %s waits for %s (run %s)", toolText(e), notify.SlackText(e.Run.AgentID), what, notify.SlackText(e.Run.ID))
}

// waitingBlocks are the waiting call's message: its sentence and the buttons. Approve and
// Decline only for a call waiting for approval (input is given in the console); every button's
// value is the call's id alone.
func waitingBlocks(e notify.Event) []slack.Block {
	key := callKey(e.Run.ID, e.ToolCall.ToolCallID)
	var buttons []slack.BlockElement
	if e.WaitsFor != "input" {
		approve := slack.NewButtonBlockElement(actionApprove, key, slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
		approve.Style = slack.StylePrimary
		decline := slack.NewButtonBlockElement(actionDecline, key, slack.NewTextBlockObject(slack.PlainTextType, "Decline", false, false))
		decline.Style = slack.StyleDanger
		buttons = append(buttons, approve, decline)
	}
	if e.URL != "" {
		open := slack.NewButtonBlockElement(actionOpen, key, slack.NewTextBlockObject(slack.PlainTextType, "Open", false, false))
		open.URL = e.URL
		buttons = append(buttons, open)
	}
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, waitingText(e), false, false), nil, nil)}
	if len(e.HiddenCharacters) > 0 {
		blocks = append(blocks, slack.NewContextBlock("hidden", slack.NewTextBlockObject(slack.MarkdownType,
			":warning: This call holds characters that change how text reads without showing themselves. Check its arguments in the console before deciding.", false, false)))
	}
	if len(buttons) > 0 {
		blocks = append(blocks, slack.NewActionBlock("interlock", buttons...))
	}
	return blocks
}

// outcomeText is the message of a decided or expired call.
func outcomeText(e notify.Event) string {
	if e.Type == notify.Expired {
		return ":hourglass: Expired"
	}
	by := notify.SlackText(e.DecidedBy)
	if by == "" {
		by = "Interlock"
	}
	switch e.Decision {
	case notify.DecisionDeclined:
		if e.Reason != "" {
			return fmt.Sprintf(":no_entry: Declined by %s: %s", by, notify.SlackText(e.Reason))
		}
		return ":no_entry: Declined by " + by
	case notify.DecisionEditApproved:
		return ":white_check_mark: Approved with edited arguments by " + by
	case notify.DecisionResumed:
		return ":white_check_mark: Resumed by " + by
	}
	return ":white_check_mark: Approved by " + by
}

// decisionText is the message of a call as a stored decision tells, prefixed (Already …) when
// it answers a press that came too late.
func decisionText(d runtype.Decision, already bool) string {
	prefix := ""
	if already {
		prefix = "Already "
	}
	by := "Interlock"
	if d.DecidedBy != nil && *d.DecidedBy != "" {
		by = notify.SlackText(*d.DecidedBy)
	}
	switch d.Kind {
	case runtype.DecisionExpired:
		return ":hourglass: Expired"
	case runtype.DecisionDeclined:
		lower := "declined"
		if !already {
			lower = "Declined"
		}
		if d.Reason != nil && *d.Reason != "" {
			return fmt.Sprintf(":no_entry: %s%s by %s: %s", prefix, lower, by, notify.SlackText(*d.Reason))
		}
		return fmt.Sprintf(":no_entry: %s%s by %s", prefix, lower, by)
	case runtype.DecisionResumed:
		if already {
			return ":white_check_mark: Already resumed by " + by
		}
		return ":white_check_mark: Resumed by " + by
	case runtype.DecisionApproved:
		if already {
			return ":white_check_mark: Already approved by " + by
		}
		return ":white_check_mark: Approved by " + by
	}
	return fmt.Sprintf("%s%s", prefix, d.Kind)
}

// aboutText is the context line under an outcome: which call.
func aboutText(e notify.Event, runID string) string {
	if e.ToolCall == nil {
		return "run " + notify.SlackText(runID)
	}
	return fmt.Sprintf("%s of agent %s (run %s)", toolText(e), notify.SlackText(e.Run.AgentID), notify.SlackText(runID))
}
