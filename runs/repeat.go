package runs

import (
	"bytes"
	"encoding/json"
	"reflect"

	"interlock/agent"
	"interlock/runtype"
)

// The same decision again. A client whose approval timed out, or was answered with an error
// after it was committed, retries it; answering the retry CONFLICT ("already approved by you")
// would tell it that its decision failed. So a decision that repeats one already stored — the
// same call, kind, edited arguments, reason and resume data, by the same principal — is
// answered with the run as it is now, as if it had been taken now, and changes nothing.
// Anything that differs (another principal, another reason, other arguments) is a different
// decision, and gets the CONFLICT naming who decided and when. So is any decision by nobody in
// particular (authentication off: Anonymous is everyone), which cannot be told to be a retry of
// the same client's rather than a second person's click.

// repeatedDecision returns the stored decision on run that d, taken by by, repeats: on the call
// callID names, or, without callID, on the call decided last when no call waits (a retry of a
// decision that named no call, because one call waited). nil when there is none. Arguments
// compare by what ran (ranWith), however they were sent.
func repeatedDecision(r *runtype.Run, callID *string, d agent.Decision, by string) *runtype.Decision {
	if by == "" {
		return nil
	}
	var stored *runtype.Decision
	switch {
	case callID != nil && *callID != "":
		// A call that waits now is asked anew: a tool that asks a second question in the middle
		// of the same call keeps its toolCallId, and the same answer to it is a new decision,
		// never a retry of the first (which would leave the question unanswered).
		for _, c := range r.ToolCalls {
			if c.ToolCallID == *callID {
				return nil
			}
		}
		for i := len(r.Decisions) - 1; i >= 0; i-- {
			if r.Decisions[i].ToolCallID == *callID {
				stored = &r.Decisions[i]
				break
			}
		}
	case len(r.ToolCalls) == 0 && len(r.Decisions) > 0:
		stored = &r.Decisions[len(r.Decisions)-1]
	}
	if stored == nil || stored.Kind != decisionKind[d.Kind] || deref(stored.DecidedBy) != by ||
		deref(stored.Reason) != d.Reason || !sameJSON(ranWith(stored.EditedArgs, stored.Args), ranWith(d.Args, stored.Args)) {
		return nil
	}
	if d.Kind == agent.CallResumed && !sameJSON(stored.ResumeData, d.ResumeData) {
		return nil
	}
	return stored
}

// ranWith is the arguments a decision ran (or would run) the tool with: the edited ones, or
// else the model's. Repeats are judged by them, not by whether arguments were sent: a quorum's
// final approval that sends the model's own arguments is stored without edited ones (nothing
// was edited), and its retry, sending them again, is the same decision.
func ranWith(edited, model json.RawMessage) json.RawMessage {
	if len(edited) > 0 {
		return edited
	}
	return model
}

// sameJSON reports whether a and b hold the same JSON value (both absent counts), whatever their
// spacing or key order: the stored form of a value may not be byte for byte what a client sent.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
