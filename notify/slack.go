package notify

import (
	"encoding/json"
	"fmt"
	"strings"

	"interlock/hidden"
)

// slackBody is the {"text": …} a Slack incoming webhook (and Mattermost, Rocket.Chat, Teams
// workflows' Slack-compatible endpoints) posts as a message, with a <url|label> link to the run.
// Every value that came from an agent or a person is placed in the server's sentence as text
// (slackText): it cannot add a link or end the line, and a character that changes how text
// reads is written as its mark (⟨U+202E⟩), with a warning naming the ones the call holds.
func slackBody(e Event) ([]byte, error) {
	tool := "a tool call"
	if e.ToolCall != nil {
		tool = slackText(e.ToolCall.ToolName)
		if !strings.Contains(tool, "`") { // a backtick would end the code span: plain text then
			tool = "`" + tool + "`"
		}
	}
	agentID := slackText(e.Run.AgentID)
	var b strings.Builder
	switch e.Type {
	case ApprovalRequested:
		if e.WaitsFor == "input" {
			fmt.Fprintf(&b, ":raising_hand: %s of agent %s waits for input", tool, agentID)
		} else {
			fmt.Fprintf(&b, ":raising_hand: %s of agent %s waits for approval", tool, agentID)
		}
	case Decided:
		verb := map[string]string{
			DecisionApproved: "approved", DecisionEditApproved: "approved with edited arguments",
			DecisionDeclined: "declined", DecisionResumed: "resumed",
		}[e.Decision]
		emoji := ":white_check_mark:"
		if e.Decision == DecisionDeclined {
			emoji = ":no_entry:"
		}
		fmt.Fprintf(&b, "%s %s of agent %s was %s", emoji, tool, agentID, verb)
		if e.DecidedBy != "" {
			fmt.Fprintf(&b, " by %s", slackText(e.DecidedBy))
		}
	case Expired:
		fmt.Fprintf(&b, ":hourglass: %s of agent %s expired without a decision", tool, agentID)
	case Reminder:
		fmt.Fprintf(&b, ":bell: %s of agent %s still waits for a decision", tool, agentID)
	case Escalated:
		fmt.Fprintf(&b, ":arrow_double_up: %s of agent %s still waits for a decision: escalated to %s", tool, agentID, slackText(strings.Join(e.EscalatedTo, ", ")))
	case Expiring:
		fmt.Fprintf(&b, ":hourglass_flowing_sand: %s of agent %s expires", tool, agentID)
		if c := e.ToolCall; c != nil && c.ExpiresAt != nil {
			fmt.Fprintf(&b, " at %s", c.ExpiresAt.UTC().Format("15:04 UTC"))
		}
		b.WriteString(" without a decision")
	}
	if e.Reason != "" && (e.Type == ApprovalRequested || e.Type == Decided) {
		fmt.Fprintf(&b, ": %s", slackText(e.Reason))
	}
	if e.URL != "" {
		fmt.Fprintf(&b, " <%s|Open run %s>", e.URL, e.Run.ID)
	} else {
		fmt.Fprintf(&b, " (run %s)", e.Run.ID)
	}
	if rs := e.hidden(); len(rs) > 0 {
		fmt.Fprintf(&b, "\n:warning: This call holds characters that change how text reads without showing themselves: %s. Check its arguments in the console, where each is shown as a mark such as %s.",
			hidden.Describe(rs), hidden.Mark(rs[0]))
	}
	return json.Marshal(map[string]string{"text": b.String()})
}

// slackText is s as text in one line of a Slack message: its hidden characters and newlines as
// marks (hidden.RevealLine), and the three characters Slack's mrkdwn treats as control
// characters escaped.
func slackText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(hidden.RevealLine(s))
}

// SlackText is s as text in one line of a Slack message (see slackText), for the slack-app
// format's messages (package slackapp).
func SlackText(s string) string { return slackText(s) }
