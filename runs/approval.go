package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"interlock/agent"
	"interlock/hidden"
	"interlock/notify"
	"interlock/runtype"
)

// Approvals for agents that run elsewhere. An external agent (agent.Agent.External) has no
// model: its code runs outside Interlock and asks, for one tool call at a time, whether it may
// run it. Each request is a run of the agent, stored SUSPENDED on that one call in the
// transaction of its events, exactly as an internal run that suspends is — so the inbox
// (suspendedRuns, suspendedRunsChanged), webhooks, expiry, approverRoles, separation of duties
// and the decisions (approve, edit and approve, decline) work on it unchanged. No loop runs for
// it: a decision ends it (TOOL_CALL_APPROVED, _DECLINED or _EXPIRED, then RUN_FINISHED,
// COMPLETED), and the caller, told the decision, runs the tool itself (with the edited
// arguments when a person edited them).
//
//	requestApproval ──▶ SUSPENDED ──approve / edit / decline / expiry──▶ COMPLETED
//	        └──(the tool needs no approval: APPROVED by the policy)──────▶ COMPLETED

// ApprovalParams are the arguments of RequestApproval. Empty strings are "not given".
type ApprovalParams struct {
	AgentID, ToolName string
	// Args are the arguments the caller wants to run the tool with: a JSON object, checked
	// against the tool's inputSchema.
	Args json.RawMessage
	// ThreadID and ResourceID are as StartParams' (the resource scopes who sees the request).
	// Context is Markdown shown to the person beside the call: what the agent is doing and why.
	// IdempotencyKey makes the request safe to repeat, as StartParams' does.
	ThreadID, ResourceID, Context, IdempotencyKey string
	// KeyWhilePending makes IdempotencyKey name the request only while it waits: once it is
	// decided (or expired), the same key makes a new request, which a person decides anew, at
	// the cost of one lookup however many requests the key made before. For
	// keys derived from what a call looks like rather than given per call (the coding-agent
	// hooks: the agents send no call id, so a later call of the same command in the same
	// session has the same key), so that one decision is never taken for a later call.
	KeyWhilePending bool
}

// checkToolName refuses (BAD_USER_INPUT) a tool name holding a control or format character, a
// line or paragraph separator, or any other character the console shows as a mark
// (hidden.Is): a name is shown in one line, as it is, everywhere (the inbox, Slack, the agent's
// own prompt), and such a character reorders or hides what a person reads there. An agent that
// takes any tool name ("*") would otherwise store whatever a caller sends.
func checkToolName(name string) error {
	if r, at, bad := hidden.InName(name); bad {
		return runtype.Errorf(runtype.CodeBadUserInput, "toolName holds %s at character %d: a tool's name may not hold control or format characters, which hide or reorder what a person reads",
			hidden.Describe([]rune{r}), at)
	}
	return nil
}

// MaxContextLength is the longest context (in characters) an approval request may carry.
const MaxContextLength = 32 * 1024

// policyReason is the reason recorded with the policy's approval of a call that needs none.
const policyReason = "approved by policy: the tool needs no approval"

// RequestApproval stores an external agent's request to run one tool call: a run SUSPENDED on
// that call (its deadline set by the tool's approvalTimeout), or, when the tool needs no
// approval (requireApproval false, and the agent's requireToolApproval off), a run COMPLETED
// at once with the call APPROVED by the policy (decidedBy null). Nothing is executed: the
// caller runs the tool once approved. It returns the run as stored; startedBy is the caller's
// subject, so that with separation of duties the caller cannot approve its own request.
//
// Who may call: a principal holding the requester role (requester, or operator and above), for
// an agent it may request for (a principal bound to agents, runtype.Principal.Agents, only for
// those), of the resource it names (a scoped principal must name one of its resources).
//
// Errors: UNAUTHENTICATED without a principal; FORBIDDEN without the requester role, for an
// agent the principal is not bound to (checked before the agent is looked up, so that it
// learns nothing of other agents), or for a resource outside the principal's; NOT_FOUND for an unknown agent; BAD_USER_INPUT — with
// nothing stored — for an agent that is not external, a tool name holding a control or
// format character (checkToolName), a tool the agent does not have, args
// that are not a JSON object matching the tool's inputSchema (checked in canonical form,
// agent.CanonicalJSON), a context longer than MaxContextLength, a threadId or resourceId
// longer than 191 characters, a threadId that belongs to another resource, or an
// idempotencyKey used before for another request. The same idempotencyKey from the same
// principal with the same request returns the run the first one made (as it is now, decided or
// not; with KeyWhilePending only while it waits), on any instance, for IdempotencyWindow at least.
func (s *Service) RequestApproval(ctx context.Context, p ApprovalParams) (*runtype.Run, error) {
	if err := require(ctx, runtype.RoleRequester, "requesting an approval"); err != nil {
		return nil, err
	}
	if err := authorizeAgent(ctx, p.AgentID); err != nil {
		return nil, err
	}
	a := s.agents.Get(p.AgentID)
	if a == nil {
		return nil, runtype.Errorf(runtype.CodeNotFound, "no agent with id %q", p.AgentID)
	}
	if !a.External {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "agent %q runs in Interlock (it has a model): start it with startRun; approvals are requested for external agents (external: true in the config)", a.ID)
	}
	if p.ToolName == "" {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "toolName must not be empty")
	}
	if n := utf8.RuneCountInString(p.ToolName); n > maxIDLength || !utf8.ValidString(p.ToolName) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "toolName is %d characters long; at most %d are allowed", n, maxIDLength)
	}
	if err := checkToolName(p.ToolName); err != nil {
		return nil, err
	}
	tool := a.Tool(p.ToolName)
	if tool == nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "agent %q has no tool %q (its tools: %s)", a.ID, p.ToolName, toolNames(a))
	}
	if len(p.Args) == 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args must be a JSON object of the tool's arguments")
	}
	args, err := agent.CanonicalJSON(p.Args)
	if err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args: %v", err)
	}
	if args[0] != '{' {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args must be a JSON object of the tool's arguments")
	}
	if err := tool.ValidateInput(args); err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args do not match the inputSchema of %s: %v", p.ToolName, err)
	}
	if !utf8.ValidString(p.Context) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "context is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(p.Context); n > MaxContextLength {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "context is %d characters long; at most %d are allowed", n, MaxContextLength)
	}
	threadID, resourceID, reqContext := emptyToNil(&p.ThreadID), emptyToNil(&p.ResourceID), emptyToNil(&p.Context)
	if err := authorizeResource(ctx, resourceID, "request approvals"); err != nil {
		return nil, err
	}
	for name, v := range map[string]*string{"threadId": threadID, "resourceId": resourceID} {
		if v != nil && utf8.RuneCountInString(*v) > maxIDLength {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "%s is %d characters long; at most %d are allowed", name, utf8.RuneCountInString(*v), maxIDLength)
		}
	}
	request := struct {
		Kind, Agent, Tool string
		Args              json.RawMessage
		Thread, Resource  *string
		Context           *string
	}{"approval", a.ID, p.ToolName, args, threadID, resourceID, reqContext}
	key, err := idempotency(ctx, emptyToNil(&p.IdempotencyKey), request)
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new run id: %w", err)
	}
	now := s.now()
	needs := tool.RequireApproval || a.RequireToolApproval
	snap := agent.NewRequest(p.ToolName, args, needs)
	c := snap.Pending[0]
	requested := runtype.ToolCall{ToolCallID: c.CallID(), ToolName: p.ToolName, Args: args, RequiresApproval: needs}
	call := requested // as it waits, with its deadline
	if needs && tool.ApprovalTimeout > 0 {
		deadline := ms(now.Add(tool.ApprovalTimeout))
		call.ExpiresAt = &deadline
	}
	r := runtype.Run{
		ID: id.String(), AgentID: a.ID, ThreadID: threadID, ResourceID: resourceID, StartedBy: startedBy(ctx),
		Context: reqContext, CreatedAt: now, UpdatedAt: now, ToolCalls: []runtype.ToolCall{}, Decisions: []runtype.Decision{},
	}
	ext := &ExternalRequest{Call: call, InstanceID: s.cfg.InstanceID}
	evs := []runtype.Event{
		{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)},
		{Type: runtype.EventToolCallRequested, ToolCall: &requested},
	}
	var encoded string
	if needs {
		waiting := call
		evs = append(evs, runtype.Event{Type: runtype.EventToolCallApproval, ToolCall: &waiting},
			runtype.Event{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)})
		snap.Seq = int64(len(evs))
		if encoded, err = snap.Encode(); err != nil {
			return nil, err
		}
		r.Status, r.SuspendedAt, r.ToolCalls = runtype.StatusSuspended, &now, []runtype.ToolCall{call}
	} else {
		reason := policyReason
		receipt, err := s.receiptFor(ctx, r.ID, call.ToolCallID, a.ID, call.ToolName, args, nil, now)
		if err != nil {
			return nil, err
		}
		ext.Decision = &runtype.Decision{RunID: r.ID, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Kind: runtype.DecisionApproved,
			DecidedAt: now, Reason: &reason, Args: args, Receipt: receipt}
		// No TOOL_CALL_APPROVED: nobody was asked, so no one is told (webhooks announce what
		// waits for a person and what a person decided); the decision is on record.
		evs = append(evs, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
		r.Status, r.Decisions = runtype.StatusCompleted, []runtype.Decision{*ext.Decision}
	}
	r.LastSeq = int64(len(evs))
	if key != nil {
		// With KeyWhilePending the store moves a key whose request ended to this one, in the
		// one claim: a decided request is never the answer, and no chain of them is walked.
		key.WhilePending = p.KeyWhilePending
	}
	outbox, err := s.announce(&r, 0, r.CreatedAt, evs, notify.Call{})
	if err != nil {
		return nil, err
	}
	err = s.store.InsertRun(ctx, NewRun{Run: r, Snapshot: encoded, Events: evs, Idempotency: key, External: ext, Outbox: outbox})
	if again, ok, rerr := s.repeated(ctx, p.IdempotencyKey, err); ok {
		return again, rerr
	}
	if errors.Is(err, ErrThreadOwned) {
		return nil, threadOwned(*threadID)
	}
	if err != nil {
		return nil, err
	}
	s.runHub.Publish(r.ID, struct{}{})
	if needs {
		s.changes.Publish(changesTopic, Change{Kind: ChangeSuspended, RunID: r.ID})
	}
	return &r, nil
}

// AwaitApproval returns an external agent's request (a run of an external agent) once it is
// decided, or as it is when wait passes first (SUSPENDED), or at once when wait is 0 or it is
// decided already. It waits on the run's stream: woken at once by a decision taken on this
// instance and within the poll interval by one taken on another (the notify loop), so it
// needs the service started. It ends when ctx ends (the client went away), with ctx's error,
// and when the service stops, with the run as it is.
//
// Who may call: a viewer (of the run's resource), or the requester who made the request.
// Errors: UNAUTHENTICATED, FORBIDDEN as Get; NOT_FOUND for an unknown run, a run the
// principal may not see, and a run that is not an approval request (its agent is not
// external); BAD_USER_INPUT for a negative wait; UNAVAILABLE when storage cannot be reached.
func (s *Service) AwaitApproval(ctx context.Context, runID string, wait time.Duration) (*runtype.Run, error) {
	if wait < 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "wait must be 0 or more, not %s", wait)
	}
	r, err := s.request(ctx, runID)
	if err != nil || r.Status != runtype.StatusSuspended || wait == 0 {
		return r, err
	}
	woke := make(chan struct{}, 1)
	// Subscribed before the run is read again, so that no decision stored meanwhile is missed;
	// the notify loop polls the progress of every run this instance's hub has subscribers of.
	sub := s.runHub.SubscribeFunc(runID, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	defer sub.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if r, err = s.request(ctx, runID); err != nil || r.Status != runtype.StatusSuspended {
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return r, err
		}
		select {
		case <-woke:
		case <-timer.C:
			return r, nil
		case <-s.ctx.Done():
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Abandon ends an external agent's request whose asker stopped waiting for its decision (a
// coding agent's hook answered without one, or the agent gave up on the hook), so that nobody
// approves afterwards a call the agent was told was not approved: while the request waits, it
// is decided EXPIRED by nobody, with a reason saying that asker stopped waiting, when, and how,
// in the compare-and-set of every decision (its events, the suspended-set change and the
// webhooks' rows, so the inbox drops it at once). A decision taken first stands (the same
// compare-and-set, ErrStale for the later one); a decision after it is CONFLICT. It returns the
// request as it ended, and whether this call ended it. ctx should outlive the asker (the
// request it came with ended, or is about to).
//
// Who may call: as AwaitApproval (a viewer of the run's resource, or the requester who made
// it); the expiry itself is the server's decision. Errors: as AwaitApproval's read, and
// UNAVAILABLE when storage cannot be reached.
func (s *Service) Abandon(ctx context.Context, runID, asker, how string) (*runtype.Run, bool, error) {
	for range 5 {
		r, err := s.Get(ctx, runID)
		if err != nil {
			return nil, false, err
		}
		if !s.isExternal(r.AgentID) {
			return nil, false, notFound(runID) // as request: nothing to a caller of the hooks
		}
		if r.Status != runtype.StatusSuspended {
			r.Snapshot, r.LeaseOwner = nil, nil
			return r, false, nil // decided (or expired) first
		}
		if r.Snapshot == nil || len(r.ToolCalls) != 1 {
			// Read as a decision committed (the run's row before it, its call's after): the
			// next read sees it decided.
			continue
		}
		snap, err := agent.DecodeSnapshot(*r.Snapshot)
		if err != nil {
			return nil, false, err
		}
		call := &r.ToolCalls[0]
		now := s.now()
		reason := fmt.Sprintf("%s stopped waiting at %s: %s", asker, now.UTC().Format("2006-01-02T15:04:05.000Z"), how)
		d := agent.Decision{Kind: agent.CallExpired, Reason: reason}
		w := s.decisionWrite(r, call, d, "", now)
		w.Abandoned = true
		if err := snap.Decide(call.ToolCallID, d); err != nil {
			return nil, false, fmt.Errorf("run %s: snapshot does not wait on %s: %w", r.ID, call.ToolCallID, err)
		}
		err = s.finishExternal(runtype.WithSystem(ctx), r, call, d, "", w)
		if errors.Is(err, ErrStale) {
			continue // decided first: the next read says how
		}
		if err != nil {
			return nil, false, err
		}
		r.Snapshot = nil
		r.Decisions = append(r.Decisions, runtype.Decision{RunID: r.ID, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
			Kind: runtype.DecisionExpired, DecidedAt: w.At, Reason: w.Reason, Args: call.Args})
		s.cfg.Logger.Info("approval request abandoned", "run", r.ID, "tool", call.ToolName, "asker", asker)
		return r, true, nil
	}
	return nil, false, runtype.Errorf(runtype.CodeConflict, "approval request %s kept changing while it was being ended", runID)
}

// request reads an approval request for AwaitApproval: a run of an external agent the
// principal may read (Get), without its snapshot.
func (s *Service) request(ctx context.Context, runID string) (*runtype.Run, error) {
	r, err := s.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !s.isExternal(r.AgentID) {
		// The same answer as for no run at all: the id of an internal run is nothing to a
		// caller of /approvals, and must not tell it that such a run exists.
		return nil, notFound(runID)
	}
	r.Snapshot, r.LeaseOwner = nil, nil
	return r, nil
}

// isExternal reports whether the agent of that id is an external agent this server serves.
func (s *Service) isExternal(agentID string) bool {
	a := s.agents.Get(agentID)
	return a != nil && a.External
}

// IsExternal reports whether the run's agent is an external agent of this server (its runs
// are approval requests).
func (s *Service) IsExternal(agentID string) bool { return s.isExternal(agentID) }

// finishRequest is commitDecision's end of an external agent's run: the decision is the last
// thing it does, so after the decision's events comes RUN_FINISHED, and the run is COMPLETED.
func finishRequest(evs []runtype.Event) []runtype.Event {
	return append(evs, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
}

func toolNames(a *agent.Agent) string {
	names := make([]string, 0, len(a.Tools)+1)
	for _, t := range a.Tools {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// finishExternal stores decision w (prepared by commitDecision) on an external agent's request
// r: its events, then RUN_FINISHED, with the run COMPLETED in the same compare-and-set, and
// only then tells subscribers. r is updated to what was stored.
func (s *Service) finishExternal(ctx context.Context, r *runtype.Run, call *runtype.ToolCall, d agent.Decision, by string, w DecisionWrite) error {
	w.Hold, w.Finish, w.Snapshot = false, true, ""
	w.Events = finishRequest(decisionEvents(call, d, by, true))
	var err error
	if w.Outbox, err = s.announce(r, w.After, w.At, w.Events, decidedCall(*call, w.Kind, w.EditedArgs)); err != nil {
		return err
	}
	if err := s.store.Decide(ctx, w); err != nil {
		return err
	}
	s.decided(w.Kind, r.SuspendedAt, w.At) // metrics (observe hook)
	s.runHub.Publish(r.ID, struct{}{})
	s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: r.ID})
	r.Version, r.UpdatedAt, r.LastSeq, r.Snapshot = r.Version+1, w.At, r.LastSeq+int64(len(w.Events)), nil
	r.Status, r.LeaseOwner, r.SuspendedAt, r.ToolCalls = runtype.StatusCompleted, nil, nil, []runtype.ToolCall{}
	return nil
}
