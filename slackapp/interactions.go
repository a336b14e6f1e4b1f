package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// maxBody bounds what a request to /slack/interactions may make the server read (Slack's
// payloads are a few KiB).
const maxBody = 1 << 20

// decideTimeout bounds the work of one press after its acknowledgement.
const decideTimeout = 30 * time.Second

// Messages a presser is told, ephemerally.
const (
	notAllowed  = "You are not allowed to decide this call in Interlock, so nothing was decided."
	moreNeeded  = "Your approval is recorded; the call needs more approvals."
	couldNotRun = "Interlock could not take your decision: "
)

// ServeHTTP takes Slack's interaction payloads (POST /slack/interactions). The raw body is read
// once and its signature checked (slack.SecretsVerifier: HMAC-SHA256 with the signing secret,
// constant-time compare, X-Slack-Request-Timestamp within 5 minutes) before anything of it is
// parsed; then the workspace and, for a button, the channel must be the configured ones. The
// request is acknowledged at once (Slack waits 3 s): the decision and the message's update
// follow asynchronously.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if a.secret == "" { // Socket Mode alone: no signing secret to check a request with
		http.Error(w, "this app takes presses over Socket Mode", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.secret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.log.Warn("slack-app: refused an interaction", "why", err)
		http.Error(w, "signature or timestamp invalid", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slack.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		http.Error(w, "no interaction payload", http.StatusBadRequest)
		return
	}
	if status, why := a.handle(cb); status != http.StatusOK {
		http.Error(w, why, status)
		return
	}
	w.WriteHeader(http.StatusOK) // an empty 200 also closes a submitted modal
}

// handle checks an interaction's workspace and, for a button, its channel (403 and why when
// either is not the configured one), and starts what it asks for after the acknowledgement:
// an approval, the decline modal, or a decline with its reason. Anything else is taken and
// ignored (the Open button is a link).
func (a *App) handle(cb slack.InteractionCallback) (int, string) {
	if cb.Team.ID != a.cfg.TeamID {
		a.log.Warn("slack-app: refused an interaction from another workspace", "team", cb.Team.ID)
		return http.StatusForbidden, "not this app's workspace"
	}
	// In a Slack Connect channel the payload's team is the workspace the message was posted in,
	// not the presser's: a member of another organisation is told apart by user.team_id, and
	// refused (their profile, and its email, are that organisation's to set).
	if cb.User.TeamID != a.cfg.TeamID {
		a.log.Warn("slack-app: refused a press by a member of another workspace", "user", cb.User.ID, "team", cb.User.TeamID)
		return http.StatusForbidden, "the presser is not a member of this app's workspace"
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		channel := cb.Channel.ID
		if channel == "" {
			channel = cb.Container.ChannelID
		}
		if channel != a.cfg.Channel {
			a.log.Warn("slack-app: refused a press in another channel", "channel", channel)
			return http.StatusForbidden, "not this app's channel"
		}
		if len(cb.ActionCallback.BlockActions) == 0 {
			break
		}
		act := cb.ActionCallback.BlockActions[0]
		runID, call, ok := parseKey(act.Value)
		if !ok || (act.ActionID != actionApprove && act.ActionID != actionDecline) {
			break // Open (a link), or nothing of ours
		}
		a.async(func(ctx context.Context) {
			if act.ActionID == actionApprove {
				a.approve(ctx, cb.User.ID, runID, call)
			} else {
				a.openDecline(ctx, cb.User.ID, cb.TriggerID, runID, call)
			}
		})
	case slack.InteractionTypeViewSubmission:
		runID, call, ok := parseKey(cb.View.PrivateMetadata)
		if cb.View.CallbackID != callbackDecline || !ok {
			break
		}
		reason := ""
		if cb.View.State != nil {
			if v, ok := cb.View.State.Values[blockReason][inputReason]; ok {
				reason = v.Value
			}
		}
		a.async(func(ctx context.Context) { a.decline(ctx, cb.User.ID, runID, call, reason) })
	}
	return http.StatusOK, ""
}

// async runs fn after the acknowledgement, bounded by decideTimeout.
func (a *App) async(fn func(ctx context.Context)) {
	a.pending.Add(1)
	go func() {
		defer a.pending.Done()
		defer func() {
			if r := recover(); r != nil { // a defect in one press never takes the server down
				a.log.Error("slack-app: press handling panicked", "panic", r)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), decideTimeout)
		defer cancel()
		fn(ctx)
	}()
}

// principal maps a Slack user to the Interlock principal who decides for them: the users map,
// else (matchEmail) the subject equal to their profile's email; its roles from the slackApp
// principals, else the auth section's static token of that subject. Nil: nobody (refused).
func (a *App) principal(ctx context.Context, userID string) (*runtype.Principal, error) {
	subject := a.cfg.Users[userID]
	if subject == "" && a.cfg.MatchEmail && userID != "" {
		u, err := a.api.GetUserInfoContext(ctx, userID)
		if err != nil {
			return nil, err
		}
		// Only a full member of the app's own workspace is matched by email: a Slack Connect
		// stranger's, a deleted user's or a bot's email is not this organisation's word.
		if u.TeamID != a.cfg.TeamID || u.IsStranger || u.Deleted || u.IsBot {
			return nil, errNotMapped
		}
		subject = strings.ToLower(u.Profile.Email)
	}
	if subject == "" {
		return nil, errNotMapped
	}
	if sp, ok := a.cfg.Principals[subject]; ok {
		p := &runtype.Principal{Subject: subject, Resources: sp.Resources}
		for _, r := range sp.Roles {
			p.Roles = append(p.Roles, runtype.Role(r))
		}
		return p, nil
	}
	if a.principalOf != nil {
		if p := a.principalOf(subject); p != nil && len(p.Roles) > 0 {
			return p, nil
		}
	}
	return nil, errNotMapped
}

func (a *App) approve(ctx context.Context, user, runID, call string) {
	p, err := a.principal(ctx, user)
	if err != nil {
		a.refuse(ctx, user, runID, call, err)
		return
	}
	run, err := a.Decider.Approve(runtype.WithPrincipal(ctx, p), runs.DecideParams{RunID: runID, ToolCallID: &call})
	a.answer(ctx, user, runID, call, run, err)
}

// openDecline opens the modal asking for the reason, for a mapped user only (Slack's trigger
// is valid for 3 s: this runs right after the acknowledgement).
func (a *App) openDecline(ctx context.Context, user, trigger, runID, call string) {
	if _, err := a.principal(ctx, user); err != nil {
		a.refuse(ctx, user, runID, call, err)
		return
	}
	input := slack.NewPlainTextInputBlockElement(slack.NewTextBlockObject(slack.PlainTextType, "Why not?", false, false), inputReason)
	input.Multiline = true
	block := slack.NewInputBlock(blockReason, slack.NewTextBlockObject(slack.PlainTextType, "Reason (the agent is told it)", false, false), nil, input)
	block.Optional = true
	view := slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      callbackDecline,
		PrivateMetadata: callKey(runID, call),
		Title:           slack.NewTextBlockObject(slack.PlainTextType, "Decline the call", false, false),
		Submit:          slack.NewTextBlockObject(slack.PlainTextType, "Decline", false, false),
		Close:           slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false),
		Blocks:          slack.Blocks{BlockSet: []slack.Block{block}},
	}
	if _, err := a.api.OpenViewContext(ctx, trigger, view); err != nil {
		a.log.Warn("slack-app: views.open", "run", runID, "call", call, "err", err)
	}
}

func (a *App) decline(ctx context.Context, user, runID, call, reason string) {
	p, err := a.principal(ctx, user)
	if err != nil {
		a.refuse(ctx, user, runID, call, err)
		return
	}
	run, err := a.Decider.Decline(runtype.WithPrincipal(ctx, p), runs.DecideParams{RunID: runID, ToolCallID: &call}, reason)
	a.answer(ctx, user, runID, call, run, err)
}

// refuse tells an unmapped user, ephemerally, that they may not decide.
func (a *App) refuse(ctx context.Context, user, runID, call string, err error) {
	if !errors.Is(err, errNotMapped) {
		a.log.Warn("slack-app: map a Slack user", "user", user, "err", err)
	}
	a.log.Info("slack-app: press refused", "user", user, "run", runID, "call", call, "why", err)
	a.ephemeral(ctx, user, notAllowed)
}

// answer shows the outcome of a decision: the message updated to who decided (or who had
// decided first, or Expired), or the presser told why nothing was decided.
func (a *App) answer(ctx context.Context, user, runID, call string, run *runtype.Run, err error) {
	switch code := runtype.ErrorCode(err); {
	case err == nil:
		if d := decisionOf(run, call); d != nil {
			a.showDecision(ctx, run, *d, false)
		} else {
			a.ephemeral(ctx, user, moreNeeded)
		}
	case code == runtype.CodeConflict:
		sys := runtype.WithSystem(ctx)
		if again, gerr := a.Decider.Get(sys, runID); gerr == nil && again != nil {
			if d := decisionOf(again, call); d != nil {
				a.showDecision(ctx, again, *d, true)
				return
			}
		}
		a.ephemeral(ctx, user, couldNotRun+err.Error())
	case code == runtype.CodeForbidden || code == runtype.CodeNotFound || code == runtype.CodeUnauthenticated:
		a.log.Info("slack-app: press refused", "user", user, "run", runID, "call", call, "why", err)
		a.ephemeral(ctx, user, notAllowed)
	case code == runtype.CodeBadUserInput:
		a.ephemeral(ctx, user, couldNotRun+err.Error())
	default:
		a.log.Error("slack-app: decide", "run", runID, "call", call, "err", err)
		a.ephemeral(ctx, user, couldNotRun+"an internal error; try again, or decide in the console.")
	}
}

// decisionOf is the decision a person (or the expiry) took on the call, nil when none yet.
func decisionOf(r *runtype.Run, call string) *runtype.Decision {
	if r == nil {
		return nil
	}
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		if d := r.Decisions[i]; d.ToolCallID == call && d.Kind != runtype.DecisionAutoApproved {
			return &r.Decisions[i]
		}
	}
	return nil
}

func (a *App) showDecision(ctx context.Context, r *runtype.Run, d runtype.Decision, already bool) {
	e := notify.Event{Run: notify.Run{ID: r.ID, AgentID: r.AgentID}, ToolCall: &runtype.ToolCall{ToolCallID: d.ToolCallID, ToolName: d.ToolName}}
	if err := a.update(ctx, r.ID, d.ToolCallID, decisionText(d, already), e); err != nil {
		a.log.Warn("slack-app: update message", "run", r.ID, "call", d.ToolCallID, "err", err)
	}
}

func (a *App) ephemeral(ctx context.Context, user, text string) {
	if _, err := a.api.PostEphemeralContext(ctx, a.cfg.Channel, user, slack.MsgOptionText(text, false)); err != nil {
		a.log.Warn("slack-app: chat.postEphemeral", "user", user, "err", err)
	}
}
