package notify

import (
	"encoding/json"
	"fmt"
	"strings"
)

// slackBody is the {"text": …} a Slack incoming webhook (and Mattermost, Rocket.Chat, Teams
// workflows' Slack-compatible endpoints) posts as a message, with a <url|label> link to the run.
func slackBody(e Event) ([]byte, error) {
	tool := "a tool call"
	if e.ToolCall != nil {
		tool = "`" + e.ToolCall.ToolName + "`"
	}
	var b strings.Builder
	switch e.Type {
	case ApprovalRequested:
		if e.WaitsFor == "input" {
			fmt.Fprintf(&b, ":raising_hand: %s of agent %s waits for input", tool, e.Run.AgentID)
		} else {
			fmt.Fprintf(&b, ":raising_hand: %s of agent %s waits for approval", tool, e.Run.AgentID)
		}
	case Decided:
		verb := map[string]string{
			DecisionApproved: "approved", DecisionEditApproved: "approved with edited arguments",
			DecisionDeclined: "declined", DecisionResumed: "resumed",
		}[e.Decision]
		fmt.Fprintf(&b, ":white_check_mark: %s of agent %s was %s", tool, e.Run.AgentID, verb)
		if e.Decision == DecisionDeclined {
			b.Reset()
			fmt.Fprintf(&b, ":no_entry: %s of agent %s was %s", tool, e.Run.AgentID, verb)
		}
		if e.DecidedBy != "" {
			fmt.Fprintf(&b, " by %s", slackEscape(e.DecidedBy))
		}
	case Expired:
		fmt.Fprintf(&b, ":hourglass: %s of agent %s expired without a decision", tool, e.Run.AgentID)
	}
	if e.Reason != "" && e.Type != Expired {
		fmt.Fprintf(&b, ": %s", slackEscape(e.Reason))
	}
	if e.URL != "" {
		fmt.Fprintf(&b, " <%s|Open run %s>", e.URL, e.Run.ID)
	} else {
		fmt.Fprintf(&b, " (run %s)", e.Run.ID)
	}
	return json.Marshal(map[string]string{"text": b.String()})
}

// slackEscape escapes the three characters Slack's mrkdwn treats as control characters.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
