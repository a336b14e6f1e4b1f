package agent

import (
	"encoding/json"
	"fmt"
	"strconv"

	"interlock/llm"
)

// CallState is where a tool call of the current step stands.
//
//	new ──(needs approval)──▶ awaiting_approval ──approve──▶ approved ──▶ executing ──▶ done
//	 │                              ├──decline──▶ declined ──────────────────────────▶ done
//	 │                              └──timeout──▶ expired ───────────────────────────▶ done
//	 └──(no approval)──▶ executing ──Suspend()──▶ suspended ──resume──▶ resumed ──▶ executing
//	                                                  └──timeout──▶ expired ──▶ done
//
// A call of a delegate tool does not execute: once it may run (new without approval, or
// approved) it is delegated while the sub-agent's run goes on, then returned with that run's
// outcome, which the loop records as its result (done).
type CallState string

// The states of a call in a snapshot.
const (
	CallNew              CallState = "new"
	CallAwaitingApproval CallState = "awaiting_approval"
	CallApproved         CallState = "approved"
	CallDeclined         CallState = "declined"
	// CallExpired: nobody decided before the tool's ApprovalTimeout passed; like a decline, the
	// tool does not run, and the model is given Reason (see ExpiredMessage).
	CallExpired   CallState = "expired"
	CallExecuting CallState = "executing"
	CallSuspended CallState = "suspended"
	CallResumed   CallState = "resumed"
	CallDone      CallState = "done"
	CallDelegated CallState = "delegated"
	CallReturned  CallState = "returned"
)

// PendingCall is a tool call of the current step and what has happened to it. The embedded
// ToolCall is the model's: its ID is the model's, which a model may reuse across steps or even
// within one, so it serves only the model's own history; everyone else names the call by
// CallID.
type PendingCall struct {
	llm.ToolCall
	// ServerID is the server's id of the call (see Snapshot.nextCallID): unique within the run,
	// assigned when the call is stored, never reused. Empty in snapshots stored before the server
	// assigned ids, whose calls go on being named by the model's id.
	ServerID       string          `json:"serverId,omitempty"`
	State          CallState       `json:"state"`
	Reason         string          `json:"reason,omitempty"`
	SuspendPayload json.RawMessage `json:"suspendPayload,omitempty"`
	// ResumeSchema is the schema the resume data of this call must match, when its tool
	// suspended it with one of its own (Call.SuspendFor); empty: the tool's ResumeSchema.
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	ResumeData   json.RawMessage `json:"resumeData,omitempty"`
	// AskedMidCall marks a suspended call whose tool is still executing: its server asked a
	// question in the middle of the call (Call.Ask), and the instance executing it holds the
	// run's lease and the call open while a person answers. Its outcome is unknown to anyone
	// but that instance: should it die, recovery treats the call as executing (interrupted),
	// never as a call to make again with the answer.
	AskedMidCall bool `json:"askedMidCall,omitempty"`
	// Interrupted marks a call whose execution was cut off by a crash: it waits for a new approval.
	Interrupted bool `json:"interrupted,omitempty"`
	// InterruptedToolCallID is the id the call was executing under when its outcome became
	// unknown, before Reissue gave it a new one: the decisions taken before, and the outcome its
	// instance may record later (runtype.LateResult), name that id.
	InterruptedToolCallID string `json:"interruptedToolCallId,omitempty"`
	// ArgsError says why the model's arguments could not be used (they were not JSON): the
	// call is answered with that error instead of being run or shown for approval.
	ArgsError string `json:"argsError,omitempty"`
	// EditedFrom holds the model's arguments when a person approved the call with edited ones
	// (Args): the model is told the call ran with other arguments than it asked for.
	EditedFrom json.RawMessage `json:"editedFrom,omitempty"`
	// Receipt is the signed receipt of the call's approval (Decision.Receipt), which the tool
	// is given when it executes (Call.Receipt); empty for a call nobody had to approve.
	Receipt string `json:"receipt,omitempty"`
	// Gate is the judgement of whether the call waits for a person, made once, when the call
	// is stored (Host.ToolCalls; runs/policy.go): a run continued later, on any instance and
	// under any config, follows it, so the decision on record is the one that applies. Nil on
	// calls that were not judged (their arguments were unusable, their tool unknown) and in
	// snapshots stored before calls were judged (Agent.Waits).
	Gate *Gate `json:"gate,omitempty"`
	// ChildRunID is the sub-agent run a delegated call waits on.
	ChildRunID string `json:"childRunId,omitempty"`
	// Result and ResultError are the outcome of a returned call's sub-agent run.
	Result      json.RawMessage `json:"result,omitempty"`
	ResultError string          `json:"resultError,omitempty"`
}

// Gate is the judgement of one call: whether it waits for a person, why, and by which policy.
type Gate struct {
	// Ask says a person decides; false: the call runs, let through by the rule Reason names.
	Ask bool `json:"ask,omitempty"`
	// Reason is the rule (requireApproval false or true, an expression and its value) or the
	// error that made a person decide.
	Reason string `json:"reason,omitempty"`
	// Revision is the revision of the policy that judged (policy.Revision), "" when the
	// agent's or the run's requireToolApproval asked.
	Revision string `json:"revision,omitempty"`
}

// Snapshot is the whole state of a run between two steps of the loop: the conversation so far and
// the tool calls of the step in progress. It is stored as JSON while the run is not finished.
type Snapshot struct {
	Messages            []llm.Message `json:"messages"`
	Pending             []PendingCall `json:"pending,omitempty"`
	RequireToolApproval bool          `json:"requireToolApproval,omitempty"`
	Steps               int           `json:"steps"`
	// Seq is the run's last event seq when the snapshot was stored. Events after it can only be
	// text of a model call that was cut off, which a recovered run announces as discarded.
	Seq int64 `json:"seq,omitempty"`
	// CallIDs is how many server ids of calls the run has assigned (the last is tc_<CallIDs>).
	CallIDs int `json:"callIds,omitempty"`
	// Request marks an external agent's approval request (NewRequest): a decision ends it, and
	// no loop ever runs it, whatever the config later says of its agent — unless Forward.
	Request bool `json:"request,omitempty"`
	// Forward marks a request whose call Interlock runs itself once it may (Agent.Forwards, the
	// MCP gateway's): an approval continues it as a run whose loop executes that one call and
	// ends, never calling a model; a decline or an expiry ends it as any request's does.
	Forward bool `json:"forward,omitempty"`
}

// CallID is the call's public id, its toolCallId in the API: the server's, or in a snapshot
// stored before the server assigned ids, the model's (which that run has shown all along).
func (c *PendingCall) CallID() string {
	if c.ServerID != "" {
		return c.ServerID
	}
	return c.ID
}

// CallIDPrefix starts every id the server gives a tool call.
const CallIDPrefix = "tc_"

// nextCallID assigns the run's next call id: tc_1, tc_2, … in the order the model asked for the
// calls. The count is stored with the snapshot that holds the calls, in the same write as the
// events that show them, so an id is never shown for one call and then given to another (a
// model call that is repeated after a crash was never shown). used are the ids a run stored
// before the server assigned ids may have shown (the model's): those are skipped.
func (s *Snapshot) nextCallID(used map[string]bool) string {
	for {
		s.CallIDs++
		id := CallIDPrefix + strconv.Itoa(s.CallIDs)
		if !used[id] {
			return id
		}
	}
}

// Reissue gives c, a call of the step whose outcome is unknown (it was executing when its
// instance died, or its tool could not tell), a new server id, and returns the old one. The call
// then waits for a new approval under an id no decision was ever taken on: a late retry of the
// approval that ran it the first time names the old id, and can neither be taken for the new
// approval nor run the tool again.
func (s *Snapshot) Reissue(c *PendingCall) (old string) {
	old = c.CallID()
	c.ServerID = s.nextCallID(s.modelCallIDs())
	return old
}

// modelCallIDs are the model's ids of every call in the run's conversation and current step.
func (s *Snapshot) modelCallIDs() map[string]bool {
	used := map[string]bool{}
	for _, m := range s.Messages {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
	}
	for _, c := range s.Pending {
		used[c.ID] = true
	}
	return used
}

// NewSnapshot starts a run: earlier messages of the thread, then the new prompt.
func NewSnapshot(history []llm.Message, prompt string, requireToolApproval bool) *Snapshot {
	msgs := append(append([]llm.Message{}, history...), llm.Message{Role: llm.RoleUser, Content: prompt})
	return &Snapshot{Messages: msgs, RequireToolApproval: requireToolApproval}
}

// DecodeSnapshot reads a stored snapshot.
func DecodeSnapshot(s string) (*Snapshot, error) {
	var snap Snapshot
	if err := json.Unmarshal([]byte(s), &snap); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return &snap, nil
}

// Encode writes the snapshot as JSON for storage.
func (s *Snapshot) Encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode snapshot: %w", err)
	}
	return string(b), nil
}

// Waiting returns the call the run is held on (awaiting approval or suspended), or nil: the
// first of them when several wait.
func (s *Snapshot) Waiting() *PendingCall {
	if w := s.waiting(); len(w) > 0 {
		return w[0]
	}
	return nil
}

// WaitingCalls returns every call of the step that waits for a person, in the model's order:
// a run whose step asked for several calls that need approval waits on all of them at once.
func (s *Snapshot) WaitingCalls() []PendingCall {
	var out []PendingCall
	for _, c := range s.waiting() {
		out = append(out, *c)
	}
	return out
}

func (s *Snapshot) waiting() []*PendingCall {
	var out []*PendingCall
	for i := range s.Pending {
		switch s.Pending[i].State {
		case CallAwaitingApproval, CallSuspended:
			out = append(out, &s.Pending[i])
		}
	}
	return out
}

// Executing returns the call that was executing when the snapshot was stored, or nil. Found in a
// recovered run it means the tool's outcome is unknown.
func (s *Snapshot) Executing() *PendingCall {
	for i := range s.Pending {
		if s.Pending[i].State == CallExecuting {
			return &s.Pending[i]
		}
	}
	return nil
}

// Decision is what a person decided about the call a run waits on.
type Decision struct {
	Kind       CallState // CallApproved, CallDeclined, CallResumed, or CallExpired (by the server)
	Reason     string
	ResumeData json.RawMessage
	// Args, with an approval, are the arguments a person edited the call to: the tool runs
	// with them, and the model is told of the change.
	Args json.RawMessage
	// Receipt, with an approval, is its signed receipt: the tool is given it (Call.Receipt).
	Receipt string
}

// Decide records a decision on the waiting call with that id (CallID), so the loop acts on it when it
// continues (once no other call of the step waits). The caller has checked that the decision fits the call (approve/decline only an
// approval, resume only a suspension).
func (s *Snapshot) Decide(callID string, d Decision) error {
	var c *PendingCall
	for _, w := range s.waiting() {
		if w.CallID() == callID {
			c = w
			break
		}
	}
	if c == nil {
		return ErrUnknownCall
	}
	c.State = d.Kind
	c.Reason = d.Reason
	if d.ResumeData != nil || d.Kind != CallApproved {
		// An approval of an interrupted resumed call runs it again with the data it had.
		c.ResumeData = d.ResumeData
	}
	c.Interrupted, c.InterruptedToolCallID = false, ""
	if d.Kind == CallApproved {
		c.Receipt = d.Receipt // a new approval (of an interrupted call) has a receipt of its own
	}
	if d.Args != nil {
		if c.EditedFrom == nil {
			c.EditedFrom = c.Args
		}
		c.Args = d.Args
	}
	return nil
}

// NewRequest is the snapshot of an external agent's approval request: no conversation, and one
// call of the tool with args, under the run's first server id (tc_1), judged by gate: waiting
// for approval (gate.Ask) or already let through by the tool's policy. forward marks a request
// whose call Interlock executes (Snapshot.Forward).
func NewRequest(tool string, args json.RawMessage, gate Gate, forward bool) *Snapshot {
	s := &Snapshot{Messages: []llm.Message{}, Request: true, Forward: forward}
	c := PendingCall{ToolCall: llm.ToolCall{Name: tool, Args: args}, State: CallAwaitingApproval, Gate: &gate}
	c.ServerID = s.nextCallID(nil)
	c.ID = c.ServerID
	if !gate.Ask {
		c.State = CallApproved
	}
	s.Pending = []PendingCall{c}
	return s
}
