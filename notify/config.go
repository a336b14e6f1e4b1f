package notify

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Config is the notifications section of the config file.
type Config struct {
	// ConsoleURL is the console's public base URL (https://interlock.example.com), for the link
	// to the run in every event. Default: none, and events carry no link.
	ConsoleURL string `yaml:"consoleURL"`
	// MaxAttempts bounds the deliveries of one event to one webhook; after the last failure it
	// is given up (state FAILED) and logged. Default 10 (retries over some 20 to 35 minutes at the default backoff).
	MaxAttempts int `yaml:"maxAttempts"`
	// Timeout bounds one POST. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// RetryBackoff is the wait before the first retry, doubled for each later one, with
	// jitter. Default 5s.
	RetryBackoff time.Duration `yaml:"retryBackoff"`
	// MaxBackoff caps the wait between two attempts. Default 15m.
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// PollInterval is how often each instance looks for due deliveries. Default 1s.
	PollInterval time.Duration `yaml:"pollInterval"`
	// Retention is how long delivered and given-up rows stay in the outbox. Default 168h.
	Retention time.Duration `yaml:"retention"`
	// Webhooks are the receivers.
	Webhooks []Webhook `yaml:"webhooks"`
}

// Webhook is one receiver of events.
type Webhook struct {
	// Name names the webhook in the outbox and in logs (never the URL, which may hold a
	// token). Default webhook-<index>. Renaming it orphans its undelivered events.
	Name string `yaml:"name"`
	// URL is where events are POSTed. Use URLEnv instead when the URL is itself a secret
	// (a Slack incoming webhook).
	URL string `yaml:"url"`
	// URLEnv names the environment variable holding the URL.
	URLEnv string `yaml:"urlEnv"`
	// SecretEnv names the environment variable holding the HMAC key of the
	// Interlock-Signature header. Required for the json format; the secret is never in the file.
	SecretEnv string `yaml:"secretEnv"`
	// Format is json (the Event, signed; default), slack ({"text": …} for an incoming webhook)
	// or slack-app (a Slack app's Block Kit message with Approve, Decline and Open buttons,
	// configured by SlackApp; package slackapp).
	Format string `yaml:"format"`
	// SlackApp configures the slack-app format (required with it, refused without it).
	SlackApp *SlackApp `yaml:"slackApp"`
	// Events are the kinds sent: approval_requested, decided, expired. Default all.
	Events []Kind `yaml:"events"`
}

// Formats of a webhook.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
	// FormatSlackApp is delivered by a Deliverer (package slackapp), not POSTed to a URL.
	FormatSlackApp = "slack-app"
)

// SlackApp is the slackApp block of a slack-app webhook: a Slack app that posts a message with
// buttons per waiting call and takes the presses at POST /slack/interactions (package slackapp).
type SlackApp struct {
	// BotTokenEnv names the environment variable holding the bot token (xoxb-…). Required.
	BotTokenEnv string `yaml:"botTokenEnv"`
	// SigningSecretEnv names the environment variable holding the app's signing secret, which
	// every press to POST /slack/interactions must be signed with. Required without
	// appTokenEnv.
	SigningSecretEnv string `yaml:"signingSecretEnv"`
	// AppTokenEnv names the environment variable holding an app-level token (xapp-…, scope
	// connections:write): presses then come over Socket Mode, a WebSocket the server opens, and
	// no public interactivity URL is needed.
	AppTokenEnv string `yaml:"appTokenEnv"`
	// TeamID is the workspace (T…) presses must come from. Required.
	TeamID string `yaml:"teamID"`
	// Channel is the channel id (C…) messages are posted to, and the only one presses are
	// taken from. Required.
	Channel string `yaml:"channel"`
	// Users maps Slack user ids (U…) to Interlock subjects.
	Users map[string]string `yaml:"users"`
	// MatchEmail, when true, maps a Slack user not in Users to the subject equal to their
	// Slack profile's email (users.info; the OIDC sign-in's subject being the email).
	MatchEmail bool `yaml:"matchEmail"`
	// Principals give a mapped subject its roles and resources; a subject not here has those of
	// the auth section's static token of that subject. A subject with neither may decide nothing.
	Principals map[string]SlackPrincipal `yaml:"principals"`
	// APIURL is Slack's Web API base (default https://slack.com/api/); tests point it at a fake.
	APIURL string `yaml:"apiURL"`
}

// SlackPrincipal is what a subject mapped from Slack may do, as a static token says it.
type SlackPrincipal struct {
	Roles []string `yaml:"roles"`
	// Resources, when present, are the only resources the subject sees; without it, all.
	Resources []string `yaml:"resources"`
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 5 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 15 * time.Minute
	}
	c.MaxBackoff = max(c.MaxBackoff, c.RetryBackoff)
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = 168 * time.Hour
	}
	hooks := make([]Webhook, len(c.Webhooks))
	for i, w := range c.Webhooks {
		if w.Name == "" {
			w.Name = fmt.Sprintf("webhook-%d", i)
		}
		if w.Format == "" {
			w.Format = FormatJSON
		}
		if len(w.Events) == 0 {
			w.Events = Kinds
		}
		hooks[i] = w
	}
	c.Webhooks = hooks
	return c
}

// Problems lists what is wrong with the section at path at (notifications), each as
// "path: what", without reading the environment.
func (c *Config) Problems(at string) []string {
	var p []string
	add := func(path, msg string) { p = append(p, path+": "+msg) }
	if c.ConsoleURL != "" && !httpURL(c.ConsoleURL) {
		add(at+".consoleURL", fmt.Sprintf("%q is not an http(s) URL", c.ConsoleURL))
	}
	if c.MaxAttempts < 0 {
		add(at+".maxAttempts", "must be at least 1 (leave it out for 10)")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"timeout", c.Timeout}, {"retryBackoff", c.RetryBackoff}, {"maxBackoff", c.MaxBackoff}, {"pollInterval", c.PollInterval}, {"retention", c.Retention}} {
		if d.v < 0 {
			add(at+"."+d.key, "must be positive (leave it out for the default)")
		}
	}
	names := map[string]int{}
	slackApps := 0
	for i, w := range c.WithDefaults().Webhooks {
		wi := fmt.Sprintf("%s.webhooks[%d]", at, i)
		if j, dup := names[w.Name]; dup {
			add(wi+".name", fmt.Sprintf("%q is already the name of webhooks[%d]", w.Name, j))
		}
		names[w.Name] = i
		if w.Format == FormatSlackApp {
			p = append(p, w.SlackApp.problems(wi+".slackApp")...)
			if w.URL != "" || w.URLEnv != "" || w.SecretEnv != "" {
				add(wi, "the slack-app format takes no url, urlEnv or secretEnv: its slackApp block says where and how")
			}
			if slackApps++; slackApps > 1 {
				add(wi+".format", "only one webhook may be slack-app (presses all come to POST /slack/interactions)")
			}
		} else if w.SlackApp != nil {
			add(wi+".slackApp", "is only for format: slack-app")
		}
		switch {
		case w.Format == FormatSlackApp:
		case w.URL == "" && w.URLEnv == "":
			add(wi, "needs url or urlEnv")
		case w.URL != "" && w.URLEnv != "":
			add(wi, "has both url and urlEnv: give one")
		case w.URL != "" && !httpURL(w.URL):
			add(wi+".url", fmt.Sprintf("%q is not an http(s) URL", w.URL))
		}
		switch w.Format {
		case FormatJSON:
			if w.SecretEnv == "" {
				add(wi+".secretEnv", "is required for the json format: name the environment variable holding the signing secret")
			}
		case FormatSlack, FormatSlackApp:
		default:
			add(wi+".format", fmt.Sprintf("%q is not json, slack or slack-app", w.Format))
		}
		for j, k := range w.Events {
			if !slices.Contains(Kinds, k) {
				add(fmt.Sprintf("%s.events[%d]", wi, j), fmt.Sprintf("%q is not approval_requested, decided, expired, approval.reminder, approval.escalated or approval.expiring", k))
			}
		}
	}
	return p
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// receiver is a webhook with its URL and secret read from the environment.
type receiver struct {
	Webhook
	url    string
	secret []byte
}

// receivers reads the webhooks' URLs and secrets from the environment; an unset variable is an
// error naming the webhook and the variable (never its value).
func (c Config) receivers(getenv func(string) string) (map[string]receiver, error) {
	out := map[string]receiver{}
	for i, w := range c.Webhooks {
		r := receiver{Webhook: w, url: w.URL}
		if w.Format == FormatSlackApp {
			out[w.Name] = r // its Deliverer reads its own variables
			continue
		}
		if w.URLEnv != "" {
			if r.url = getenv(w.URLEnv); r.url == "" {
				return nil, fmt.Errorf("notifications.webhooks[%d] (%s): the environment variable %s (urlEnv) is not set", i, w.Name, w.URLEnv)
			}
			if !httpURL(r.url) {
				return nil, fmt.Errorf("notifications.webhooks[%d] (%s): the environment variable %s (urlEnv) is not an http(s) URL", i, w.Name, w.URLEnv)
			}
		}
		if w.SecretEnv != "" {
			s := getenv(w.SecretEnv)
			if s == "" {
				return nil, fmt.Errorf("notifications.webhooks[%d] (%s): the environment variable %s (secretEnv) is not set", i, w.Name, w.SecretEnv)
			}
			r.secret = []byte(s)
		}
		out[w.Name] = r
	}
	return out, nil
}

// Targets are the webhooks as the outbox needs them: a name, and the kinds it takes (of c
// WithDefaults, so unnamed webhooks and ones without events get the names and kinds the
// dispatcher uses). The run service is given them (runs.Config.Webhooks).
func (c Config) Targets() []Target {
	c = c.WithDefaults()
	out := make([]Target, len(c.Webhooks))
	for i, w := range c.Webhooks {
		out[i] = Target{Name: w.Name, Events: w.Events}
	}
	return out
}

// problems lists what is wrong with a slack-app webhook's slackApp block at path at.
func (s *SlackApp) problems(at string) []string {
	if s == nil {
		return []string{at + ": is required for format: slack-app"}
	}
	var p []string
	add := func(path, msg string) { p = append(p, path+": "+msg) }
	for _, f := range []struct{ key, v, what string }{
		{"botTokenEnv", s.BotTokenEnv, "name the environment variable holding the bot token (xoxb-…)"},
		{"teamID", s.TeamID, "the workspace id (T…) presses must come from"},
		{"channel", s.Channel, "the channel id (C…) to post to"},
	} {
		if f.v == "" {
			add(at+"."+f.key, "is required: "+f.what)
		}
	}
	if s.SigningSecretEnv == "" && s.AppTokenEnv == "" {
		add(at, "needs signingSecretEnv (presses to POST /slack/interactions, signed) or appTokenEnv (presses over Socket Mode)")
	}
	if len(s.Users) == 0 && !s.MatchEmail {
		add(at, "needs users (Slack user id: subject) or matchEmail: true, or nobody could press a button")
	}
	for id, subject := range s.Users {
		if id == "" || subject == "" {
			add(at+".users", fmt.Sprintf("%q: %q: a Slack user id and a subject, neither empty", id, subject))
		}
	}
	for subject, sp := range s.Principals {
		if len(sp.Roles) == 0 {
			add(fmt.Sprintf("%s.principals[%q].roles", at, subject), "at least one role is required")
		}
	}
	if s.APIURL != "" && !httpURL(s.APIURL) {
		add(at+".apiURL", fmt.Sprintf("%q is not an http(s) URL", s.APIURL))
	}
	return p
}
