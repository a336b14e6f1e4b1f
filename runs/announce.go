package runs

import (
	"encoding/json"
	"fmt"
	"time"

	"interlock/notify"
	"interlock/runtype"
)

// Announcement is one row of the webhooks' outbox: one event (notify.Event, as JSON) for one
// webhook. The service decides which writes announce what (Announce); the store writes the
// rows it is given in the transaction of the events they announce, never after, and the
// dispatcher (notify) delivers them.
type Announcement struct {
	// EventID is the event's stable id (notify.EventID), the same for every webhook.
	EventID string
	// Target is the webhook's name.
	Target string
	Kind   notify.Kind
	RunID  string
	// Payload is the notify.Event as JSON, without URL.
	Payload []byte
	// At is when it was written (the write's time): the row is due at once.
	At time.Time
}

// Announce returns the outbox rows of the events evs appended to run r after seq `after`, all
// at instant at, for the webhooks targets (none: none). This is the one rule of which events
// announce which webhooks:
//
//   - only a top-level run announces: a sub-agent's suspension and decision surface on its
//     supervisor's run, whose own events announce them;
//   - a call waiting for approval or input is approval_requested; an approval, an edited
//     approval, a decline, and a resume with data are decided; an expiry is expired (notify's
//     FromRunEvents picks them from the events);
//   - each event goes to every target whose events list takes its kind.
//
// decided is what the write knows of the call it decides, when it decides one: whether its
// arguments were edited, and the call a resume resumed (see notify.Call).
func Announce(targets []notify.Target, r *runtype.Run, after int64, at time.Time, evs []runtype.Event, decided notify.Call) ([]Announcement, error) {
	if len(targets) == 0 || r.ParentRunID != nil {
		return nil, nil
	}
	lookup := func(string) (notify.Call, error) { return decided, nil }
	list, err := notify.FromRunEvents(notify.Run{ID: r.ID, AgentID: r.AgentID, ThreadID: r.ThreadID, ResourceID: r.ResourceID}, after, at, evs, lookup)
	if err != nil {
		return nil, err
	}
	var out []Announcement
	for _, e := range list {
		payload, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode notification %s: %w", e.ID, err)
		}
		for _, t := range targets {
			if t.Takes(e.Type) {
				out = append(out, Announcement{EventID: e.ID, Target: t.Name, Kind: e.Type, RunID: r.ID, Payload: payload, At: runtype.StoredTime(at)})
			}
		}
	}
	return out, nil
}

// announce is Announce for the service's webhooks (Config.Webhooks).
func (s *Service) announce(r *runtype.Run, after int64, at time.Time, evs []runtype.Event, decided notify.Call) ([]Announcement, error) {
	return Announce(s.cfg.Webhooks, r, after, at, evs, decided)
}

// decidedCall is what announcing a decision of kind on call needs to know of it: whether
// edited arguments were approved, and the call itself when it is resumed with data.
func decidedCall(call runtype.ToolCall, kind runtype.DecisionKind, editedArgs []byte) notify.Call {
	out := notify.Call{Edited: kind == runtype.DecisionApproved && editedArgs != nil}
	if kind == runtype.DecisionResumed {
		out.Resumed = &runtype.ToolCall{ToolCallID: call.ToolCallID, ToolName: call.ToolName, Args: call.Args, SuspendPayload: call.SuspendPayload}
	}
	return out
}
