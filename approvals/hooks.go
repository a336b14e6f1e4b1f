package approvals

// Coding-agent permission hooks. Claude Code's PermissionRequest hook (an HTTP hook) and Codex's
// (a command hook that POSTs its stdin with curl) ask here before their agent runs a tool:
//
//	POST /hooks/claude-code/{agentId}?wait=DURATION   the hook's JSON input as the body
//	POST /hooks/codex/{agentId}?wait=DURATION
//
// The body becomes an approval request of the external agent agentId (runs.RequestApproval:
// the tool's name and input, threadId the session, a context in Markdown saying which agent
// asks, where and what for), and the answer waits for its decision — at most wait (default
// DefaultHookWait, the agents' default hook timeout less a margin), capped by MaxWait — then is
// the agent's own JSON (hooks_body.go). A held hook takes a connection slot of its client
// (Options.SlotFunc) until it is answered. A refusal (401, 403, 404, 400, 413, 415, 429, 503) is
// {"error": {"code", "message"}} with its status, as /approvals answers them: both agents then
// ask their own person, as they do when a hook fails.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// DefaultHookWait is how long a hook is held when it does not say (?wait=): both agents cancel a
// hook after 600 s unless configured otherwise, and the answer must reach them before that.
const DefaultHookWait = 600*time.Second - hookMargin

// hookMargin is how much sooner than the agent's default timeout a hook is answered.
const hookMargin = 10 * time.Second

// Hooks serves /hooks/claude-code/{agentId} and /hooks/codex/{agentId}.
type Hooks struct{ o Options }

// NewHooks returns the hook endpoints of o (MaxWait caps how long a hook is held; ConsoleURL
// is not used: the agents' answers carry no url).
func NewHooks(o Options) *Hooks { return &Hooks{o: o.withDefaults()} }

func (h *Hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	rest, ok := strings.CutPrefix(r.URL.Path, "/hooks/")
	kind, agentID, _ := strings.Cut(rest, "/")
	a := hookAgent(kind)
	if !ok || (a != claudeCode && a != codex) || agentID == "" || strings.Contains(agentID, "/") {
		writeError(w, http.StatusNotFound, string(runtype.CodeNotFound), "not found: the hook endpoints are POST /hooks/claude-code/{agentId} and POST /hooks/codex/{agentId}, agentId an external agent")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s's PermissionRequest hook POSTs its JSON input here", a.name()))
		return
	}
	wait, ok := h.wait(w, r)
	if !ok {
		return
	}
	body, ok := h.o.readJSON(w, r, "the hook's input", false)
	if !ok {
		return
	}
	req, err := parseHook(a, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, string(runtype.CodeBadUserInput), err.Error())
		return
	}
	release, ok := h.o.slot(w, r, wait)
	if !ok {
		return
	}
	defer release()
	if h.o.rateLimited(w, r, "") {
		return
	}
	md := req.contextMarkdown(a)
	rn, err := h.o.Service.RequestApproval(r.Context(), runs.ApprovalParams{
		AgentID: agentID, ToolName: req.ToolName, Args: req.ToolInput, ThreadID: req.SessionID,
		ResourceID: r.URL.Query().Get("resourceId"), Context: md, IdempotencyKey: req.idempotencyKey(a, agentID, md),
		KeyWhilePending: true, // a decided request is never the answer to a later call
	})
	if err != nil {
		h.o.fail(w, r, err)
		return
	}
	start := time.Now()
	if rn.Status == runtype.StatusSuspended && wait > 0 {
		// The server's deadlines were set for a request answered at once: the read deadline goes
		// (the body is read; a client that leaves still ends ctx), the write one moves past the wait.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
		id := rn.ID
		if rn, err = h.o.Service.AwaitApproval(r.Context(), id, wait); err != nil {
			if r.Context().Err() != nil {
				// The agent gave up on the hook (closed the connection: its own timeout):
				// nobody to answer, and the request ends, as when the wait ends.
				_, _, _ = h.abandon(r, id, a, "it closed the hook's connection before anyone decided")
				return
			}
			h.o.fail(w, r, err)
			return
		}
	}
	o, decided := outcomeOf(rn)
	if !decided {
		if time.Since(start) < wait {
			// The wait ended early: the server is stopping, and the agent, answered 503, asks its
			// own person. It stopped waiting for Interlock as surely as when its wait ends, so the
			// request ends too (a decision taken first is the answer). Only if that cannot be
			// stored does the request stay, and the answer says so.
			ended, abandoned, err := h.abandon(r, rn.ID, a, "Interlock stopped while its hook waited, so the agent asked its own person")
			if err == nil && !abandoned {
				if o, decided = outcomeOf(ended); decided {
					h.answer(w, a, o)
					return
				}
			}
			msg := "Interlock is stopping: the request " + rn.ID + " ended without a decision"
			if err != nil {
				msg = "Interlock is stopping: the request " + rn.ID + " still waits in its inbox"
			}
			w.Header().Set("Retry-After", strconv.Itoa(runtype.RetryAfter))
			writeError(w, http.StatusServiceUnavailable, string(runtype.CodeUnavailable), msg)
			return
		}
		// The answer says nobody decided: the request ends first, in the decision's
		// compare-and-set, so that nobody approves afterwards a call the agent was told was
		// not approved. A decision taken first stands, and is the answer.
		ended, abandoned, err := h.abandon(r, rn.ID, a, fmt.Sprintf("its hook's wait of %s ended before anyone decided", wait.Round(time.Millisecond)))
		if err != nil {
			h.o.fail(w, r, err)
			return
		}
		if o, decided = outcomeOf(ended); abandoned || !decided {
			o = hookOutcome{kind: outcomeUndecided, waited: wait}
		}
	}
	h.answer(w, a, o)
}

// answer writes outcome o in agent a's JSON.
func (h *Hooks) answer(w http.ResponseWriter, a hookAgent, o hookOutcome) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(o.answer(a))
}

// abandon ends request runID of agent a, its asker having stopped waiting (how: why, for the
// decision's reason) — runs.Service.Abandon, on a context that outlives r's (the agent may have
// gone already) for at most abandonTimeout. It returns the request as it ended and whether this
// ended it (false: a decision came first).
func (h *Hooks) abandon(r *http.Request, runID string, a hookAgent, how string) (*runtype.Run, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), abandonTimeout)
	defer cancel()
	rn, abandoned, err := h.o.Service.Abandon(ctx, runID, a.name(), how)
	if err != nil {
		h.o.Logger.Warn("hooks: end a request nobody waits for any more", "run", runID, "err", err)
	}
	return rn, abandoned, err
}

// abandonTimeout bounds the write that ends a request whose asker stopped waiting.
const abandonTimeout = 10 * time.Second

// outcomeOf is how request rn ended, or false while it waits.
func outcomeOf(rn *runtype.Run) (hookOutcome, bool) {
	if rn.Status == runtype.StatusSuspended || len(rn.Decisions) == 0 {
		return hookOutcome{}, false
	}
	d := rn.Decisions[len(rn.Decisions)-1]
	o := hookOutcome{at: d.DecidedAt}
	if d.DecidedBy != nil {
		o.decidedBy = *d.DecidedBy
	}
	switch d.Kind {
	case runtype.DecisionApproved, runtype.DecisionAutoApproved:
		o.kind = outcomeApproved
		if d.EditedArgs != nil {
			o.kind, o.args = outcomeEdited, d.EditedArgs
		}
	case runtype.DecisionDeclined:
		o.kind = outcomeDeclined
		if d.Reason != nil {
			o.reason = *d.Reason
		}
	default: // EXPIRED (a request is never RESUMED)
		o.kind = outcomeExpired
	}
	return o, true
}

// wait reads ?wait= (parseWait); absent, DefaultHookWait. Keep it under the hook's timeout.
func (h *Hooks) wait(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	return parseWait(w, r, DefaultHookWait, h.o.MaxWait, "590 or 590s, 9m50s, less than the hook's timeout")
}
