package notify

import (
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	secret, body, now := []byte("s3cret"), []byte(`{"id":"evt_1"}`), time.Unix(1_700_000_000, 0)
	h := Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=1700000000,v1=") {
		t.Fatalf("header = %q", h)
	}
	if err := Verify(secret, h, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("Verify of a fresh signature: %v", err)
	}
	for name, c := range map[string]struct {
		secret []byte
		header string
		body   []byte
		now    time.Time
	}{
		"other body":         {secret, h, []byte(`{"id":"evt_2"}`), now},
		"other secret":       {[]byte("other"), h, body, now},
		"replayed later":     {secret, h, body, now.Add(6 * time.Minute)},
		"from the future":    {secret, h, body, now.Add(-6 * time.Minute)},
		"timestamp replaced": {secret, strings.Replace(h, "t=1700000000", "t=1700000100", 1), body, now},
		"no signature":       {secret, "t=1700000000", body, now},
		"empty":              {secret, "", body, now},
	} {
		if err := Verify(c.secret, c.header, c.body, c.now, 5*time.Minute); err == nil {
			t.Errorf("%s: Verify accepted it", name)
		}
	}
}

func TestConfigProblems(t *testing.T) {
	c := Config{ConsoleURL: "console", MaxAttempts: -1, Webhooks: []Webhook{
		{URL: "https://a.example/hook"}, // json without a secret
		{Name: "webhook-0", URL: "ftp://x", SecretEnv: "S", Format: "xml", Events: []Kind{"decided", "started"}},
		{URL: "https://a", URLEnv: "U", Format: FormatSlack},
		{Format: FormatSlack},
	}}
	got := strings.Join(c.Problems("notifications"), "\n")
	for _, want := range []string{
		`notifications.consoleURL: "console" is not an http(s) URL`,
		"notifications.maxAttempts: must be at least 1",
		"notifications.webhooks[0].secretEnv: is required for the json format",
		`notifications.webhooks[1].name: "webhook-0" is already the name of webhooks[0]`,
		`notifications.webhooks[1].url: "ftp://x" is not an http(s) URL`,
		`notifications.webhooks[1].format: "xml" is not json, slack or slack-app`,
		`notifications.webhooks[1].events[1]: "started" is not approval_requested, decided, expired, approval.reminder, approval.escalated or approval.expiring`,
		"notifications.webhooks[2]: has both url and urlEnv",
		"notifications.webhooks[3]: needs url or urlEnv",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	ok := Config{Webhooks: []Webhook{{URL: "https://a.example", SecretEnv: "S"}, {URLEnv: "SLACK", Format: FormatSlack}}}
	if p := ok.Problems("notifications"); len(p) != 0 {
		t.Errorf("a good section has problems: %q", p)
	}
}

func TestReceiversReadTheEnvironmentAndNameWhatIsMissing(t *testing.T) {
	c := Config{Webhooks: []Webhook{{URLEnv: "HOOK_URL", SecretEnv: "HOOK_SECRET"}}}.WithDefaults()
	env := map[string]string{"HOOK_URL": "https://hooks.example/T/B/token"}
	_, err := c.receivers(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "HOOK_SECRET (secretEnv) is not set") || strings.Contains(err.Error(), "token") {
		t.Fatalf("missing secret: %v", err)
	}
	env["HOOK_SECRET"] = "x"
	r, err := c.receivers(func(k string) string { return env[k] })
	if err != nil || r["webhook-0"].url != env["HOOK_URL"] || string(r["webhook-0"].secret) != "x" {
		t.Fatalf("receivers = %+v, %v", r, err)
	}
}

func TestBackoffGrowsWithJitterUpToTheCap(t *testing.T) {
	d := &Dispatcher{cfg: Config{RetryBackoff: time.Second, MaxBackoff: 10 * time.Second}}
	for attempt, hi := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 20: 10 * time.Second} {
		for range 50 {
			if b := d.backoff(attempt); b < hi/2 || b > hi {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempt, b, hi/2, hi)
			}
		}
	}
}

func TestRunURL(t *testing.T) {
	for base, want := range map[string]string{
		"":                               "",
		"https://c.example":              "https://c.example/?run=r1",
		"https://c.example/interlock///": "https://c.example/interlock/?run=r1",
	} {
		if got := RunURL(base, "r1"); got != want {
			t.Errorf("RunURL(%q) = %q, want %q", base, got, want)
		}
	}
}
