package notify

import (
	"strings"
	"testing"
)

// TestSlackAppConfigProblems: a slack-app webhook's mistakes are reported with their paths; a
// complete one (HTTP or Socket Mode) has none.
func TestSlackAppConfigProblems(t *testing.T) {
	c := Config{Webhooks: []Webhook{
		{Name: "a", Format: FormatSlackApp},
		{Name: "b", Format: FormatSlackApp, URL: "https://x.example", SlackApp: &SlackApp{APIURL: "ftp://x", Principals: map[string]SlackPrincipal{"rita": {}}}},
		{Name: "c", URL: "https://x.example", SecretEnv: "S", SlackApp: &SlackApp{}},
	}}
	got := strings.Join(c.Problems("notifications"), "\n")
	for _, want := range []string{
		"notifications.webhooks[0].slackApp: is required for format: slack-app",
		"notifications.webhooks[1].slackApp.botTokenEnv: is required",
		"notifications.webhooks[1].slackApp.teamID: is required",
		"notifications.webhooks[1].slackApp.channel: is required",
		"notifications.webhooks[1].slackApp: needs signingSecretEnv",
		"notifications.webhooks[1].slackApp: needs users",
		`notifications.webhooks[1].slackApp.principals["rita"].roles: at least one role is required`,
		`notifications.webhooks[1].slackApp.apiURL: "ftp://x" is not an http(s) URL`,
		"notifications.webhooks[1]: the slack-app format takes no url",
		"notifications.webhooks[1].format: only one webhook may be slack-app",
		"notifications.webhooks[2].slackApp: is only for format: slack-app",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, sa := range []SlackApp{
		{BotTokenEnv: "B", SigningSecretEnv: "S", TeamID: "T1", Channel: "C1", Users: map[string]string{"U1": "rita"}},
		{BotTokenEnv: "B", AppTokenEnv: "A", TeamID: "T1", Channel: "C1", MatchEmail: true},
	} {
		ok := Config{Webhooks: []Webhook{{Format: FormatSlackApp, SlackApp: &sa}}}
		if p := ok.Problems("notifications"); len(p) != 0 {
			t.Errorf("%+v: %v", sa, p)
		}
	}
}
