package agent

// OutcomeUnknown is what a tool returns when its request may have reached the system that
// carries it out and no answer came back: a connection that broke after the request was sent,
// a server that died mid-call. Whether it took effect is unknown, so it is neither a result nor
// an error the model could act on — sending it again might do it twice. The run suspends with the
// call awaiting a new approval, marked interrupted, as when the instance executing it crashed;
// Reason, shown to the person deciding, says truthfully what is known.
type OutcomeUnknown struct {
	Reason string
}

func (e *OutcomeUnknown) Error() string { return e.Reason }
