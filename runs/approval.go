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
//	        └──(the policy lets it through: AUTO_APPROVED)──────────────▶ COMPLETED

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

// RequestApproval stores an external agent's request to run one tool call, judged as every call
// is (judge, policy.go: the principal of ctx is the asker a policy reads): a run SUSPENDED on
// that call (its deadline set by the tool's approvalTimeout, the judgement's reason as the
// call's approvalReason), or, when the policy lets it through (requireApproval false, or an
// expression false for these arguments, and the agent's requireToolApproval off), a run
// COMPLETED at once with the call AUTO_APPROVED (decidedBy null, the rule as reason, the
// policy's revision, a receipt). Nothing is executed: the
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
	req, err := s.checkApproval(ctx, p)
	if err != nil {
		return nil, err
	}
	return s.storeApproval(ctx, req)
}

// approvalRequest is a request checked and ready to store: what checkApproval found valid is
// what storeApproval writes, so that the checks (the config's and the caller's) and the write
// meet in one type instead of a dozen locals.
type approvalRequest struct {
	agent *agent.Agent
	tool  *agent.Tool
	// args are the call's arguments in canonical form (agent.CanonicalJSON).
	args                          json.RawMessage
	threadID, resourceID, context *string
	// key is the request's idempotency key (nil without one); keyText is the key as sent, for
	// the answer to a key reused for another request.
	key     *Idempotency
	keyText string
	// gate is the call's judgement: Ask, it waits for a person; else the policy lets it through.
	gate agent.Gate
}

// checkApproval checks RequestApproval's caller and arguments in the order its contract gives
// (who may ask first, so that a caller learns nothing of agents it may not ask for), reading
// nothing but the config. Errors: those of RequestApproval before anything is stored.
func (s *Service) checkApproval(ctx context.Context, p ApprovalParams) (*approvalRequest, error) {
	a, err := s.requestedAgent(ctx, p.AgentID)
	if err != nil {
		return nil, err
	}
	tool, err := requestedTool(a, p.ToolName)
	if err != nil {
		return nil, err
	}
	args, err := requestedArgs(tool, p.Args)
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(p.Context) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "context is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(p.Context); n > MaxContextLength {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "context is %d characters long; at most %d are allowed", n, MaxContextLength)
	}
	req := &approvalRequest{agent: a, tool: tool, args: args, keyText: p.IdempotencyKey,
		threadID: emptyToNil(&p.ThreadID), resourceID: emptyToNil(&p.ResourceID), context: emptyToNil(&p.Context)}
	if err := authorizeResource(ctx, req.resourceID, "request approvals"); err != nil {
		return nil, err
	}
	for name, v := range map[string]*string{"threadId": req.threadID, "resourceId": req.resourceID} {
		if v != nil && utf8.RuneCountInString(*v) > maxIDLength {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "%s is %d characters long; at most %d are allowed", name, utf8.RuneCountInString(*v), maxIDLength)
		}
	}
	request := struct {
		Kind, Agent, Tool string
		Args              json.RawMessage
		Thread, Resource  *string
		Context           *string
	}{"approval", a.ID, tool.Name, args, req.threadID, req.resourceID, req.context}
	if req.key, err = idempotency(ctx, emptyToNil(&p.IdempotencyKey), request); err != nil {
		return nil, err
	}
	if req.key != nil {
		// With KeyWhilePending the store moves a key whose request ended to this one, in the
		// one claim: a decided request is never the answer, and no chain of them is walked.
		req.key.WhilePending = p.KeyWhilePending
	}
	// Judged last, once the request is known to be valid: a refused request evaluates nothing.
	req.gate = s.judge(ctx, judgeCall{agent: a, tool: tool, args: args, threadID: req.threadID, resourceID: req.resourceID,
		startedBy: startedBy(ctx), asker: runtype.PrincipalFrom(ctx)})
	return req, nil
}

// MayRequest says whether the principal of ctx may request approvals for agent agentID — the
// requester role and the agent binding RequestApproval checks first — without looking the
// agent up: for an entry point that refuses a principal before it asks anything (the MCP
// gateway, at the door). Errors: UNAUTHENTICATED, FORBIDDEN, as RequestApproval's.
func (s *Service) MayRequest(ctx context.Context, agentID string) error {
	if err := require(ctx, runtype.RoleRequester, "requesting an approval"); err != nil {
		return err
	}
	return authorizeAgent(ctx, agentID)
}

// requestedAgent is the external agent an approval is requested for, once the principal of ctx
// may request it: the role and the agent binding are checked before the agent is looked up.
func (s *Service) requestedAgent(ctx context.Context, agentID string) (*agent.Agent, error) {
	if err := s.MayRequest(ctx, agentID); err != nil {
		return nil, err
	}
	a := s.agents.Get(agentID)
	if a == nil {
		return nil, runtype.Errorf(runtype.CodeNotFound, "no agent with id %q", agentID)
	}
	if !a.External {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "agent %q runs in Interlock (it has a model): start it with startRun; approvals are requested for external agents (external: true in the config)", a.ID)
	}
	return a, nil
}

// requestedTool is agent a's tool of that name, once the name is one a person can read.
func requestedTool(a *agent.Agent, name string) (*agent.Tool, error) {
	if name == "" {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "toolName must not be empty")
	}
	if n := utf8.RuneCountInString(name); n > maxIDLength || !utf8.ValidString(name) {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "toolName is %d characters long; at most %d are allowed", n, maxIDLength)
	}
	if err := checkToolName(name); err != nil {
		return nil, err
	}
	tool := a.Tool(name)
	if tool == nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "agent %q has no tool %q (its tools: %s)", a.ID, name, toolNames(a))
	}
	return tool, nil
}

// requestedArgs are the call's arguments in canonical form, once they are a JSON object that
// matches the tool's inputSchema (checked in that form: what is stored is what was checked).
func requestedArgs(tool *agent.Tool, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args must be a JSON object of the tool's arguments")
	}
	args, err := agent.CanonicalJSON(raw)
	if err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args: %v", err)
	}
	if args[0] != '{' {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args must be a JSON object of the tool's arguments")
	}
	if err := tool.ValidateInput(args); err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args do not match the inputSchema of %s: %v", tool.Name, err)
	}
	return args, nil
}

// storeApproval stores a checked request as a run of its agent (approvalRun), and only then
// tells subscribers. A key claimed before answers with the run it made (repeated).
//
// A request a live grant matches (requestGrants) is stored let through by it, consuming a use
// in the insert's transaction; a grant spent meanwhile (ErrGrantSpent, nothing stored) gives
// way to the next, then to a person.
func (s *Service) storeApproval(ctx context.Context, req *approvalRequest) (*runtype.Run, error) {
	grants, err := s.requestGrants(ctx, req)
	if err != nil {
		return nil, err
	}
	var n NewRun
	var taken time.Time // when the write that leases a forwarded call's run was sent, at the latest
	for i := 0; ; i++ {
		var g *runtype.Grant
		if i < len(grants) {
			g = &grants[i]
		}
		if n, err = s.approvalRun(ctx, req, g); err != nil {
			return nil, err
		}
		taken = time.Now()
		err = s.store.InsertRun(ctx, n)
		if g == nil || !errors.Is(err, ErrGrantSpent) {
			break
		}
	}
	if again, ok, rerr := s.repeated(ctx, req.keyText, err); ok {
		return again, rerr
	}
	if errors.Is(err, ErrThreadOwned) {
		return nil, threadOwned(*req.threadID)
	}
	if err != nil {
		return nil, err
	}
	s.runHub.Publish(n.Run.ID, struct{}{})
	if n.Run.Status == runtype.StatusSuspended {
		s.changes.Publish(changesTopic, Change{Kind: ChangeSuspended, RunID: n.Run.ID})
	}
	if n.Lease != "" {
		// A forwarded call the policy let through: it runs now, here.
		snap, err := agent.DecodeSnapshot(n.Snapshot)
		if err != nil {
			return nil, err
		}
		r := n.Run
		s.execute(req.agent, &r, n.Lease, snap, taken, causedBy(ctx, CauseStart))
	}
	return &n.Run, nil
}

// approvalRun is the run a request is stored as: SUSPENDED on its call (with the call's
// deadline, from the tool's approvalTimeout) when it needs a person, else COMPLETED (or, for
// a forwarded call, RUNNING) with the call AUTO_APPROVED, receipt included: by the policy, or,
// when grant is not nil, by that grant (a use of which the insert consumes), with
// TOOL_CALL_APPROVED naming it.
func (s *Service) approvalRun(ctx context.Context, req *approvalRequest, grant *runtype.Grant) (NewRun, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return NewRun{}, fmt.Errorf("new run id: %w", err)
	}
	now := s.now()
	snap := agent.NewRequest(req.tool.Name, req.args, req.gate, req.agent.Forwards)
	requested := runtype.ToolCall{ToolCallID: snap.Pending[0].CallID(), ToolName: req.tool.Name, Args: req.args, RequiresApproval: req.gate.Ask,
		PolicyRevision: req.gate.Revision}
	if req.gate.Ask {
		requested.ApprovalReason = req.gate.Reason
	}
	call := requested // as it waits, with its deadline
	if req.gate.Ask && req.tool.ApprovalTimeout > 0 {
		deadline := runtype.StoredTime(now.Add(req.tool.ApprovalTimeout))
		call.ExpiresAt = &deadline
	}
	if req.gate.Ask {
		followUp(&call, req.tool, now) // its reminder, escalation and warning (followup.go)
	}
	n := NewRun{
		Run: runtype.Run{
			ID: id.String(), AgentID: req.agent.ID, ThreadID: req.threadID, ResourceID: req.resourceID, StartedBy: startedBy(ctx),
			Context: req.context, CreatedAt: now, UpdatedAt: now, ToolCalls: []runtype.ToolCall{}, Decisions: []runtype.Decision{},
		},
		Events: []runtype.Event{
			{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)},
			{Type: runtype.EventToolCallRequested, ToolCall: &requested},
		},
		Idempotency: req.key,
		External:    &ExternalRequest{Call: call, InstanceID: s.cfg.InstanceID},
	}
	if req.gate.Ask && grant == nil {
		waiting := call
		n.Events = append(n.Events, runtype.Event{Type: runtype.EventToolCallApproval, ToolCall: &waiting},
			runtype.Event{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)})
		snap.Seq = int64(len(n.Events))
		if n.Snapshot, err = snap.Encode(); err != nil {
			return NewRun{}, err
		}
		n.Run.Status, n.Run.SuspendedAt, n.Run.ToolCalls = runtype.StatusSuspended, &now, []runtype.ToolCall{call}
	} else {
		receipt, err := s.receiptFor(ctx, n.Run.ID, call.ToolCallID, req.agent.ID, call.ToolName, req.args, nil, now)
		if err != nil {
			return NewRun{}, err
		}
		d := autoApproved(n.Run.ID, call, req.gate, receipt, now)
		n.External.Decision = &d
		if grant != nil {
			// A person's standing approval (grant.go): TOOL_CALL_APPROVED names the grant.
			byGrant, id := grantReason(grant), grant.ID
			d.GrantID, d.Reason = &id, &byGrant
			approved := requested
			n.Events = append(n.Events, runtype.Event{Type: runtype.EventToolCallApproved, ToolCall: &approved, Reason: byGrant, GrantID: id})
			if err := snap.Decide(call.ToolCallID, agent.Decision{Kind: agent.CallApproved}); err != nil {
				return NewRun{}, err
			}
		}
		// A policy's approval has no TOOL_CALL_APPROVED: nobody was asked, so no one is told
		// (webhooks announce what waits for a person and what a person decided); the decision
		// is on record.
		n.Run.Decisions = []runtype.Decision{*n.External.Decision}
		if req.agent.Forwards {
			// Interlock runs the call: the run is stored RUNNING, leased to this instance, and
			// storeApproval starts its execution.
			snap.Pending[0].Receipt = deref(receipt)
			snap.Seq = int64(len(n.Events))
			if n.Snapshot, err = snap.Encode(); err != nil {
				return NewRun{}, err
			}
			n.Lease, n.TTL = s.newLease(), s.cfg.LeaseTTL
			n.Run.Status = runtype.StatusRunning
		} else {
			n.Events = append(n.Events, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
			n.Run.Status = runtype.StatusCompleted
		}
	}
	n.Run.LastSeq = int64(len(n.Events))
	if n.Outbox, err = s.announce(&n.Run, 0, now, n.Events, notify.Call{}); err != nil {
		return NewRun{}, err
	}
	return n, nil
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
	return s.await(ctx, runID, wait, func(st runtype.Status) bool { return st != runtype.StatusSuspended })
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
		r, err := s.getRecord(ctx, runID)
		if err != nil {
			return nil, false, err
		}
		if !s.isExternal(r.AgentID) {
			return nil, false, notFound(runID) // as request: nothing to a caller of the hooks
		}
		if r.Status != runtype.StatusSuspended {
			return &r.Run, false, nil // decided (or expired) first
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
		now := s.now()
		reason := fmt.Sprintf("%s stopped waiting at %s: %s", asker, now.UTC().Format("2006-01-02T15:04:05.000Z"), how)
		dec := &decision{top: r, run: r, call: &r.ToolCalls[0], snap: snap, d: agent.Decision{Kind: agent.CallExpired, Reason: reason}}
		w := dec.write(s.cfg.InstanceID, now)
		w.Abandoned = true
		call := dec.call
		if err := snap.Decide(call.ToolCallID, dec.d); err != nil {
			return nil, false, fmt.Errorf("run %s: snapshot does not wait on %s: %w", r.ID, call.ToolCallID, err)
		}
		err = s.finishExternal(runtype.WithSystem(ctx), dec, w)
		if errors.Is(err, ErrStale) {
			continue // decided first: the next read says how
		}
		if err != nil {
			return nil, false, err
		}
		r.Decisions = append(r.Decisions, runtype.Decision{RunID: r.ID, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
			Kind: runtype.DecisionExpired, DecidedAt: w.At, Reason: w.Reason, Args: call.Args})
		s.cfg.Logger.Info("approval request abandoned", "run", r.ID, "tool", call.ToolName, "asker", asker)
		return &r.Run, true, nil
	}
	return nil, false, runtype.Errorf(runtype.CodeConflict, "approval request %s kept changing while it was being ended", runID)
}

// request reads an approval request for AwaitApproval: a run of an external agent the
// principal may read (Get).
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
