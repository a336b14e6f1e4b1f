package agent

// OutcomeUnknown is what a tool returns when its request may have reached the system that
// carries it out and no answer came back: a connection that broke after the request was sent,
// a server that died mid-call, an answer that did not come within the tool's timeout. Whether it
// took effect is unknown, so it is neither a result nor an error the model could act on — sending
// it again might do it twice. The run suspends with the call awaiting a new approval, marked
// interrupted, as when the instance executing it crashed; Reason, shown to the person deciding,
// says truthfully what is known.
type OutcomeUnknown struct {
	Reason string
	// ModelError, when not empty, is what the model is told instead, as a tool error, when the
	// call needed no approval (Agent.NeedsApproval): the run goes on, as after any failed call,
	// and the model may try again. Tools set it for a request that timed out after it was sent.
	// A tool nobody gates is one the operator lets the model call freely and repeat (lookups,
	// reads), and a slow answer is the commonest failure of such tools: stopping the run for a
	// person at each would make them unusable. A gated call is different: a person approved one
	// execution, and only a person may decide that it runs again. Empty (a broken connection, a
	// server that died mid-call): the call waits for a person whatever its tool.
	ModelError string
}

func (e *OutcomeUnknown) Error() string { return e.Reason }
