package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"interlock/llm"
)

// DeclinedMessage is what the model is told when a call is declined without a reason.
const DeclinedMessage = "Tool call was not approved by the user"

// ExpiredMessage is what the model is told when nobody decided on a call of tool within its
// approval timeout (after; 0 when unknown): the request timed out, which is not a person's
// refusal. approval tells a call held for approval from one that waited for input (suspend()).
func ExpiredMessage(tool string, after time.Duration, approval bool) string {
	what := "The approval request for " + tool
	if !approval {
		what = "The request for input of " + tool
	}
	within := ""
	if after > 0 {
		within = " after " + shortDuration(after)
	}
	return fmt.Sprintf("%s timed out%s without a decision; the tool was not run.", what, within)
}

// shortDuration writes 30m for 30m0s and 1h for 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Host is where the loop reports what happens. Each method that takes the snapshot must store it
// together with the event it describes, atomically, before returning; an error stops the run.
type Host interface {
	// Run says which run the loop is driving; tools get it with each call.
	Run() RunInfo
	// TextDelta reports the next piece of assistant text.
	TextDelta(ctx context.Context, text string) error
	// ModelCallRetried reports that the model call in progress is made again (its answer was
	// cut off): the text it reported so far is void.
	ModelCallRetried(ctx context.Context) error
	// ToolCalls reports the calls the model asked for in this step (calls is snap.Pending), and
	// judges them: it sets the Gate of each call whose arguments are usable and whose tool the
	// agent has (and the Receipt of one it lets through) on snap.Pending before storing it. A
	// call without a Gate follows Agent.NeedsApproval.
	ToolCalls(ctx context.Context, snap *Snapshot, calls []PendingCall) error
	// ToolStarted is called right before a tool executes (the call is in state executing), so a
	// crash during execution is known afterwards and the tool is not silently run again.
	ToolStarted(ctx context.Context, snap *Snapshot, call PendingCall) error
	// ToolResult reports the outcome of a call: its JSON result, or an error message.
	ToolResult(ctx context.Context, snap *Snapshot, call PendingCall, result json.RawMessage, errMsg string) error
	// ToolDeclined reports that a declined call was answered with the reason (the tool did not
	// run, so there is no result to report; the decision was already).
	ToolDeclined(ctx context.Context, snap *Snapshot, call PendingCall) error
	// StepFinished reports that every call of the step has its result.
	StepFinished(ctx context.Context, snap *Snapshot) error
}

// Outcome is how a Run call ended: with a final text, or held on a call.
type Outcome struct {
	// Text is the final assistant text when the run completed.
	Text string
	// Held is the call the run waits on (nil when completed). Held.State says whether it waits
	// for approval (CallAwaitingApproval), for resume data (CallSuspended) or for a sub-agent's
	// run (CallDelegated). When it waits for approval, the step's later calls that need one wait
	// with it (Snapshot.WaitingCalls lists them all).
	Held *PendingCall
}

// Run drives the loop from snap until the model gives a final text or a call must wait for a
// person. It mutates snap; the host has stored every change by the time Run returns. An error
// (from the model or the host) means the run cannot go on.
func (a *Agent) Run(ctx context.Context, snap *Snapshot, host Host) (Outcome, error) {
	for {
		if len(snap.Pending) == 0 {
			if snap.Request {
				// A forwarded request (Snapshot.Forward) ends with its one call: there is no
				// model to hand the result to.
				return Outcome{}, nil
			}
			if snap.Steps >= a.maxSteps() {
				return Outcome{}, &StepsError{Steps: snap.Steps}
			}
			resp, err := a.callModel(ctx, snap, host)
			if err != nil {
				return Outcome{}, err
			}
			calls := make([]llm.ToolCall, len(resp.ToolCalls))
			used := snap.modelCallIDs()
			for i, tc := range resp.ToolCalls {
				pc := PendingCall{ToolCall: tc, State: CallNew, ServerID: snap.nextCallID(used)}
				pc.Args, pc.ArgsError = usableArgs(tc.Args)
				if t := a.Tool(tc.Name); t != nil && pc.ArgsError == "" {
					// Checked before anyone is asked to approve: a call no person could
					// sensibly judge goes back to the model as an error.
					if err := t.input.Validate(pc.Args); err != nil {
						pc.ArgsError = "invalid arguments: " + err.Error()
					}
				}
				calls[i] = pc.ToolCall // with the model's own id: its history is its own
				snap.Pending = append(snap.Pending, pc)
			}
			snap.Messages = append(snap.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: calls})
			if len(calls) == 0 {
				snap.Steps++
				return Outcome{Text: resp.Text}, nil
			}
			if err := host.ToolCalls(ctx, snap, snap.Pending); err != nil {
				return Outcome{}, err
			}
		}
		for i := range snap.Pending {
			held, err := a.advance(ctx, snap, &snap.Pending[i], host)
			if err != nil {
				return Outcome{}, err
			}
			if held {
				if snap.Pending[i].State == CallAwaitingApproval {
					a.holdApprovals(snap, i+1)
				}
				c := snap.Pending[i]
				return Outcome{Held: &c}, nil
			}
		}
		snap.Pending = nil
		snap.Steps++
		if err := host.StepFinished(ctx, snap); err != nil {
			return Outcome{}, err
		}
	}
}

// holdApprovals marks the calls of the step from index from on that need approval as awaiting it,
// so that a person sees every approval a step asks for at once rather than one after the other.
// The calls still run in the model's order, once every approval is decided.
func (a *Agent) holdApprovals(snap *Snapshot, from int) {
	for i := from; i < len(snap.Pending); i++ {
		c := &snap.Pending[i]
		if c.State == CallNew && c.ArgsError == "" && a.Waits(snap, c) {
			c.State = CallAwaitingApproval
		}
	}
}

// advance takes one call as far as it can go. It reports true when the call must wait.
func (a *Agent) advance(ctx context.Context, snap *Snapshot, c *PendingCall, host Host) (bool, error) {
	tool := a.Tool(c.Name)
	if c.ArgsError != "" && c.State == CallNew {
		return false, a.finish(ctx, snap, c, host, nil, c.ArgsError, "Error: "+c.ArgsError)
	}
	switch c.State {
	case CallDone:
		return false, nil
	case CallAwaitingApproval, CallSuspended, CallDelegated:
		return true, nil
	case CallReturned:
		if c.ResultError != "" {
			return false, a.finish(ctx, snap, c, host, nil, c.ResultError, "Error: "+c.ResultError)
		}
		return false, a.finish(ctx, snap, c, host, c.Result, "", modelText(c.Result))
	case CallNew:
		if a.Waits(snap, c) {
			c.State = CallAwaitingApproval
			return true, nil
		}
	case CallDeclined, CallExpired:
		reason := c.Reason
		if reason == "" && c.State == CallDeclined {
			reason = DeclinedMessage
		}
		if reason == "" {
			reason = ExpiredMessage(c.Name, 0, true)
		}
		c.State = CallDone
		snap.Messages = append(snap.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: reason})
		return false, host.ToolDeclined(ctx, snap, *c)
	case CallExecuting:
		// Only a recovering instance sees this; it must decide before calling Run.
		return false, fmt.Errorf("tool call %s was executing when the run stopped", c.CallID())
	}
	// new (no approval needed), approved, resumed: execute.
	if tool == nil {
		msg := fmt.Sprintf("unknown tool %q", c.Name)
		return false, a.finish(ctx, snap, c, host, nil, msg, "Error: "+msg)
	}
	if tool.SubAgent != nil {
		// The host starts the sub-agent's run; this run waits for its outcome.
		c.State = CallDelegated
		return true, nil
	}
	resumeData := c.ResumeData
	c.State = CallExecuting
	if err := host.ToolStarted(ctx, snap, *c); err != nil {
		return false, err
	}
	var ask func(context.Context, Question) (Answer, error)
	if asker, ok := host.(Asker); ok {
		call := *c
		ask = func(ctx context.Context, q Question) (Answer, error) { return asker.AskMidCall(ctx, snap, call, q) }
	}
	result, susp, errMsg, unknown := execute(ctx, tool, c, host.Run(), resumeData, ask)
	if unknown != nil {
		if unknown.ModelError != "" && !a.Waits(snap, c) {
			// Nobody gates this tool: the model is told, as of any failed call (OutcomeUnknown).
			return false, a.finish(ctx, snap, c, host, nil, unknown.ModelError, "Error: "+unknown.ModelError)
		}
		// The call stays executing, as a crash would leave it: the host holds it for a person.
		return false, unknown
	}
	if susp != nil {
		c.State = CallSuspended
		c.SuspendPayload, c.ResumeSchema = susp.payload, susp.schema
		c.ResumeData = nil
		return true, nil
	}
	if errMsg != "" {
		return false, a.finish(ctx, snap, c, host, nil, errMsg, "Error: "+errMsg)
	}
	return false, a.finish(ctx, snap, c, host, result, "", modelText(result))
}

// EditedNote is how the model learns that a person changed a call's arguments before approving
// it (both as ReadableJSON: <, > and & as themselves); the tool's answer follows it.
const EditedNote = "A person changed the arguments of this call before approving it; the tool ran with %s instead of %s. The result:\n"

// finish records a call's result in the conversation and reports it.
func (a *Agent) finish(ctx context.Context, snap *Snapshot, c *PendingCall, host Host, result json.RawMessage, errMsg, content string) error {
	if c.EditedFrom != nil {
		content = fmt.Sprintf(EditedNote, ReadableJSON(c.Args), ReadableJSON(c.EditedFrom)) + content
	}
	return a.record(ctx, snap, c, host, result, errMsg, content)
}

// record puts a call's result in the conversation and reports it.
func (a *Agent) record(ctx context.Context, snap *Snapshot, c *PendingCall, host Host, result json.RawMessage, errMsg, content string) error {
	c.State = CallDone
	snap.Messages = append(snap.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: content})
	return host.ToolResult(ctx, snap, *c, result, errMsg)
}

// execute runs a tool once. It returns the JSON result, or the suspension (its payload as JSON),
// or an error text. A panic in the tool is an error result, not a crash of the server.
func execute(ctx context.Context, tool *Tool, c *PendingCall, run RunInfo, resumeData json.RawMessage, ask func(context.Context, Question) (Answer, error)) (result json.RawMessage, susp *suspended, errMsg string, unknown *OutcomeUnknown) {
	defer func() {
		if r := recover(); r != nil {
			result, susp, errMsg, unknown = nil, nil, fmt.Sprintf("tool %s panicked: %v", tool.Name, r), nil
		}
	}()
	// The tool is told the call's server id (what people approved), never the model's, which a
	// model may reuse.
	call := &Call{ToolCall: llm.ToolCall{ID: c.CallID(), Name: c.Name, Args: c.Args}, Run: run, SuspendPayload: c.SuspendPayload, ResumeData: resumeData, Receipt: c.Receipt, Ask: ask}
	v, err := tool.executor()(ctx, call)
	var s *suspension
	if errors.As(err, &s) {
		b, merr := json.Marshal(s.payload)
		if merr != nil {
			return nil, nil, "suspend payload is not JSON: " + merr.Error(), nil
		}
		return nil, &suspended{payload: b, schema: s.schema}, "", nil
	}
	if errors.As(err, &unknown) {
		return nil, nil, "", unknown
	}
	if err != nil {
		return nil, nil, err.Error(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, "result is not JSON: " + err.Error(), nil
	}
	return b, nil, "", nil
}

// suspended is a tool's suspension as the loop records it: its payload, and the schema of the
// resume data when the call names its own (Call.SuspendFor).
type suspended struct{ payload, schema json.RawMessage }

func (a *Agent) callModel(ctx context.Context, snap *Snapshot, host Host) (llm.Response, error) {
	msgs := snap.Messages
	if a.Instructions != "" {
		msgs = append([]llm.Message{{Role: llm.RoleSystem, Content: a.Instructions}}, msgs...)
	}
	req := llm.Request{Messages: msgs, RetryFunc: func() error { return host.ModelCallRetried(ctx) }}
	for _, t := range a.AllTools() {
		req.Tools = append(req.Tools, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	model := a.caller()
	resp, err := model.Stream(ctx, req, func(d string) error { return host.TextDelta(ctx, d) })
	if err != nil {
		return llm.Response{}, &ModelError{Model: model.Name(), Err: err}
	}
	return resp, nil
}

// modelText is a result as the model reads it: a JSON string as its text (an MCP tool's text
// answer, say), anything else as ReadableJSON.
func modelText(result json.RawMessage) string {
	var s string
	if len(result) > 0 && result[0] == '"' && json.Unmarshal(result, &s) == nil {
		return s
	}
	return ReadableJSON(result)
}

// usableArgs returns the model's arguments in their canonical form (see CanonicalJSON; {} when
// empty). Arguments that cannot be used (not JSON, nested too deeply, a key given twice) are
// neither run nor shown for approval: they are kept as a JSON string, which anything can show
// safely, with the error the model is answered with.
func usableArgs(raw json.RawMessage) (json.RawMessage, string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), ""
	}
	args, err := CanonicalJSON(raw)
	if err == nil {
		return args, ""
	}
	s, _ := json.Marshal(string(raw)) // marshalling a string cannot fail (invalid UTF-8 becomes U+FFFD)
	return s, "invalid arguments: " + err.Error()
}

// ModelError is a failed model call. Its text may hold what the provider said, so it goes to
// the log; people reading the run see a short message.
type ModelError struct {
	Model string
	Err   error
}

func (e *ModelError) Error() string { return fmt.Sprintf("model %s: %v", e.Model, e.Err) }
func (e *ModelError) Unwrap() error { return e.Err }

// StepsError ends a run that used all its steps without a final answer.
type StepsError struct{ Steps int }

func (e *StepsError) Error() string {
	return fmt.Sprintf("the agent stopped after %d steps without a final answer", e.Steps)
}
