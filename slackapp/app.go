// Package slackapp is the slack-app notification target: a Slack app that posts one Block Kit
// message per waiting call (Approve, Decline, Open) and takes the presses of its buttons at
// POST /slack/interactions. A press is verified (Slack's signature over the raw body, a 5-minute
// timestamp window, the configured workspace and channel), mapped to an Interlock principal
// (the config's users map, or the Slack profile's email), and decided by the run service's own
// Approve and Decline, exactly as the console's decisions are: roles, approverRoles, resources,
// separation of duties and the compare-and-set all apply. Nobody mapped is nobody allowed.
package slackapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// Decider is what a press needs of the run service (*runs.Service): the console's decisions,
// and the run to tell who decided a call first.
type Decider interface {
	Approve(ctx context.Context, p runs.DecideParams) (*runtype.Run, error)
	Decline(ctx context.Context, p runs.DecideParams, reason string) (*runtype.Run, error)
	Get(ctx context.Context, runID string) (*runtype.Run, error)
}

// Options are what New needs besides the webhook.
type Options struct {
	Getenv func(string) string
	Logger *slog.Logger
	// PrincipalOf gives the roles of a mapped subject not in the slackApp principals: the auth
	// section's static token of that subject (auth.Authenticator.PrincipalOf); nil: none.
	PrincipalOf func(subject string) *runtype.Principal
}

// App is one slack-app webhook: its notify.Deliverer and its interactions handler (ServeHTTP).
// Set Decider before serving presses.
type App struct {
	Decider Decider

	name        string
	cfg         notify.SlackApp
	api         *slack.Client
	secret      string
	store       Store
	principalOf func(string) *runtype.Principal
	log         *slog.Logger
	pending     sync.WaitGroup // presses being decided after their acknowledgement
	appToken    string         // Socket Mode's (socket.go); "" for the HTTP endpoint alone
	stop        context.CancelFunc
	loops       sync.WaitGroup // Socket Mode's connection and event loops
}

// staleReservation is how long a reserved post without a message blocks the others: far longer
// than one post takes.
const staleReservation = 2 * time.Minute

// apiTimeout bounds each Slack Web API call, well under staleReservation.
const apiTimeout = 30 * time.Second

// New reads the webhook's bot token and signing secret from the environment (an error names
// the variable, never its value) and returns its app.
func New(w notify.Webhook, store Store, o Options) (*App, error) {
	if w.SlackApp == nil {
		return nil, fmt.Errorf("webhook %s: no slackApp block", w.Name)
	}
	c := *w.SlackApp
	unset := func(v, key string) error {
		return fmt.Errorf("notifications webhook %s (slack-app): the environment variable %s (%s) is not set", w.Name, v, key)
	}
	token := o.Getenv(c.BotTokenEnv)
	if token == "" {
		return nil, unset(c.BotTokenEnv, "botTokenEnv")
	}
	var secret, appToken string
	if c.SigningSecretEnv != "" {
		if secret = o.Getenv(c.SigningSecretEnv); secret == "" {
			return nil, unset(c.SigningSecretEnv, "signingSecretEnv")
		}
	}
	if c.AppTokenEnv != "" {
		if appToken = o.Getenv(c.AppTokenEnv); appToken == "" {
			return nil, unset(c.AppTokenEnv, "appTokenEnv")
		}
	}
	// Every Slack API call is bounded: a hung call would hold a notification worker, and outlive
	// the reservation that keeps a second instance from posting the same message.
	opts := []slack.Option{slack.OptionAppLevelToken(appToken), slack.OptionHTTPClient(&http.Client{Timeout: apiTimeout})}
	if c.APIURL != "" {
		u := c.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	a := &App{name: w.Name, cfg: c, api: slack.New(token, opts...), secret: secret, appToken: appToken, store: store, principalOf: o.PrincipalOf, log: o.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a, nil
}

// Wait waits for the presses acknowledged so far to be decided and answered (tests).
func (a *App) Wait() { a.pending.Wait() }

// Deliver implements notify.Deliverer: a waiting call's message is posted once (reserved in the
// store first, so a retry or another instance never posts it again); a decision or an expiry
// updates that message. Other events are not shown in Slack.
func (a *App) Deliver(ctx context.Context, e notify.Event) error {
	if e.ToolCall == nil {
		return nil
	}
	switch e.Type {
	case notify.ApprovalRequested:
		return a.post(ctx, e)
	case notify.Decided, notify.Expired:
		return a.update(ctx, e.Run.ID, e.ToolCall.ToolCallID, outcomeText(e), e)
	}
	return nil
}

func (a *App) post(ctx context.Context, e notify.Event) error {
	call := e.ToolCall.ToolCallID
	mine, err := a.store.ReserveSlackMessage(ctx, a.name, e.Run.ID, call, staleReservation)
	if err != nil {
		return err
	}
	if !mine {
		// Posted already, or reserved by an attempt that may still post (or may have died with
		// the reservation): only a recorded message ends this delivery; otherwise it is tried
		// again, and takes the reservation over once it is stale.
		m, err := a.store.SlackMessage(ctx, a.name, e.Run.ID, call)
		if err != nil {
			return err
		}
		if m == nil {
			return fmt.Errorf("chat.postMessage of run %s call %s: reserved by another attempt, not posted yet", e.Run.ID, call)
		}
		return nil
	}
	channel, ts, err := a.api.PostMessageContext(ctx, a.cfg.Channel, slack.MsgOptionText(waitingText(e), false),
		slack.MsgOptionBlocks(waitingBlocks(e)...))
	if err != nil {
		if rerr := a.store.ReleaseSlackMessage(context.WithoutCancel(ctx), a.name, e.Run.ID, call); rerr != nil {
			a.log.Error("slack-app: release reservation", "run", e.Run.ID, "call", call, "err", rerr)
		}
		return fmt.Errorf("chat.postMessage: %w", err)
	}
	return a.store.SetSlackMessage(context.WithoutCancel(ctx), a.name, e.Run.ID, call, Message{Channel: channel, TS: ts})
}

// update replaces the call's message by text, without buttons. No message posted: nothing to do.
func (a *App) update(ctx context.Context, runID, call, text string, e notify.Event) error {
	m, err := a.store.SlackMessage(ctx, a.name, runID, call)
	if err != nil || m == nil {
		return err
	}
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil)}
	if ctxLine := aboutText(e, runID); ctxLine != "" {
		blocks = append(blocks, slack.NewContextBlock("about", slack.NewTextBlockObject(slack.MarkdownType, ctxLine, false, false)))
	}
	if _, _, _, err := a.api.UpdateMessageContext(ctx, m.Channel, m.TS, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...)); err != nil {
		return fmt.Errorf("chat.update: %w", err)
	}
	return nil
}

// callKey is what a button carries: the call's id (its run's id and its toolCallId), never its
// arguments.
func callKey(runID, toolCallID string) string { return runID + "|" + toolCallID }

func parseKey(v string) (runID, toolCallID string, ok bool) {
	runID, toolCallID, ok = strings.Cut(v, "|")
	return runID, toolCallID, ok && runID != "" && toolCallID != ""
}

var errNotMapped = errors.New("not mapped")
