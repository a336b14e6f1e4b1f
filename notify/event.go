// Package notify tells people outside Interlock that a run needs them: when a tool call waits for
// approval or input, when it is decided and when it expires, it POSTs a signed event to the
// webhooks of the config file's notifications section. Events are written to an outbox in the
// transaction that stores what they announce (see Store), and a Dispatcher delivers them
// asynchronously with retries, so a slow or dead receiver never slows a run, and nothing is lost
// across restarts or repeated by a second instance.
package notify

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"interlock/hidden"
	"interlock/runtype"
)

// Kind is what an event announces; it is also the name a webhook's events list uses.
type Kind string

// The kinds of events delivered.
const (
	// ApprovalRequested: a tool call waits for a person (approval, or the input its tool's
	// suspend() asked for).
	ApprovalRequested Kind = "approval_requested"
	// Decided: a person approved (maybe with edited arguments), declined or resumed a call.
	Decided Kind = "decided"
	// Expired: nobody decided before the tool's approvalTimeout passed.
	Expired Kind = "expired"
	// Reminder: a call still waits after its tool's remindAfter (once per call).
	Reminder Kind = "approval.reminder"
	// Escalated: a call still waits after its tool's escalateAfter; from now on the roles of
	// EscalatedTo may decide it as well (once per call).
	Escalated Kind = "approval.escalated"
	// Expiring: a call expires within its tool's expiringBefore, at its toolCall.expiresAt,
	// unless someone decides it (once per call).
	Expiring Kind = "approval.expiring"
)

// Kinds lists every kind, the default of a webhook's events.
var Kinds = []Kind{ApprovalRequested, Decided, Expired, Reminder, Escalated, Expiring}

// Decisions, in Event.Decision.
const (
	DecisionApproved     = "approved"
	DecisionEditApproved = "edit_approved"
	DecisionDeclined     = "declined"
	DecisionResumed      = "resumed"
)

// Event is the JSON body of a delivery in the json format. Its ID is the same on every attempt
// and every webhook, so receivers deduplicate on it (delivery is at least once).
type Event struct {
	ID        string    `json:"id"`
	Type      Kind      `json:"type"`
	CreatedAt time.Time `json:"createdAt"`
	Run       Run       `json:"run"`
	// ToolCall is the call waited on or decided.
	ToolCall *runtype.ToolCall `json:"toolCall,omitempty"`
	// WaitsFor is approval or input, on approval_requested.
	WaitsFor string `json:"waitsFor,omitempty"`
	// Decision is approved, edit_approved, declined or resumed, on decided.
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decidedBy,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// DueAt is when a follow-up (approval.reminder, approval.escalated, approval.expiring)
	// was due: the call's remindAt, escalateAt or expiringAt. The call's expiresAt says when
	// it expires.
	DueAt *time.Time `json:"dueAt,omitempty"`
	// EscalatedTo are the roles that may decide the call from now on, on approval.escalated.
	EscalatedTo []string `json:"escalatedTo,omitempty"`
	// URL is the run in the console, when notifications.consoleURL is set.
	URL string `json:"url,omitempty"`
	// HiddenCharacters warns that the call's tool name, arguments or payload, the reason, or the
	// run's thread or resource hold characters that change how text reads without showing
	// themselves (bidi controls, invisible and control characters: package hidden), as code
	// points ("U+202E"), in order of first appearance. The values above are exactly as stored
	// (the tool receives the arguments as they are); a receiver that shows them to a person
	// should show each such character as a visible mark, as the console does (⟨U+202E⟩).
	HiddenCharacters []string `json:"hiddenCharacters,omitempty"`
}

// hidden lists the hidden characters of what e shows a person (see HiddenCharacters).
func (e Event) hidden() []rune {
	var out []rune
	if c := e.ToolCall; c != nil {
		out = hidden.Merge(hidden.In(c.ToolName), hidden.InJSON(c.Args), hidden.InJSON(c.SuspendPayload))
	}
	for _, s := range []*string{e.Run.ThreadID, e.Run.ResourceID, &e.Reason, &e.DecidedBy} {
		if s != nil {
			out = hidden.Merge(out, hidden.In(*s))
		}
	}
	return out
}

// withHidden is e with HiddenCharacters filled in (nil when there are none).
func (e Event) withHidden() Event {
	e.HiddenCharacters = nil
	if rs := e.hidden(); len(rs) > 0 {
		e.HiddenCharacters = hidden.Codes(rs)
	}
	return e
}

// Run is the run an event is about.
type Run struct {
	ID         string  `json:"id"`
	AgentID    string  `json:"agentId"`
	ThreadID   *string `json:"threadId,omitempty"`
	ResourceID *string `json:"resourceId,omitempty"`
}

// EventID is the stable id of the event announced by the run event at seq: a run's seq never
// repeats, so neither does the id.
func EventID(runID string, seq int64) string { return fmt.Sprintf("evt_%s_%d", runID, seq) }

// Call is what the writer of a decision knows of the decided call, to announce it.
type Call struct {
	// Edited: approved with arguments a person changed.
	Edited bool
	// Resumed is the call resumed with data, when the lookup was for one (RUN_RESUMED alone
	// announces a resume).
	Resumed *runtype.ToolCall
}

// FromRunEvents picks, from events appended to a run after seq `after`, those that announce
// something to notify, as Events without URL. lookup is asked about a decided call (by its id;
// "" for the call a RUN_RESUMED resumed) only when a batch holds a decision (runs.Announce
// answers it from the decision it writes).
func FromRunEvents(r Run, after int64, at time.Time, evs []runtype.Event, lookup func(toolCallID string) (Call, error)) ([]Event, error) {
	var out []Event
	decided := false
	for i, ev := range evs {
		e := Event{ID: EventID(r.ID, after+int64(i)+1), CreatedAt: at.UTC().Truncate(time.Millisecond), Run: r, ToolCall: ev.ToolCall, Reason: ev.Reason, DecidedBy: ev.DecidedBy}
		switch ev.Type {
		case runtype.EventToolCallApproval, runtype.EventToolCallSuspended:
			e.Type, e.WaitsFor = ApprovalRequested, "approval"
			if ev.Type == runtype.EventToolCallSuspended {
				e.WaitsFor = "input"
			}
		case runtype.EventToolCallApproved:
			decided = true
			id := ""
			if ev.ToolCall != nil {
				id = ev.ToolCall.ToolCallID
			}
			c, err := lookup(id)
			if err != nil {
				return nil, err
			}
			e.Type, e.Decision = Decided, DecisionApproved
			if c.Edited {
				e.Decision = DecisionEditApproved
			}
		case runtype.EventToolCallDeclined:
			decided = true
			e.Type, e.Decision = Decided, DecisionDeclined
		case runtype.EventToolCallExpired:
			decided = true
			e.Type = Expired
		case runtype.EventToolCallReminder, runtype.EventToolCallEscalated, runtype.EventToolCallExpiring:
			followUp(&e, ev)
		case runtype.EventRunResumed:
			// A RUN_RESUMED after a call's own decision event repeats it; alone, it is a resume.
			if decided || ev.DecidedBy == "" {
				continue
			}
			c, err := lookup("")
			if err != nil {
				return nil, err
			}
			if c.Resumed == nil {
				continue
			}
			e.Type, e.Decision, e.ToolCall = Decided, DecisionResumed, c.Resumed
		default:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// followUp makes e the webhook of a follow-up event ev of a waiting call: its kind, and when it
// was due.
func followUp(e *Event, ev runtype.Event) {
	var due *time.Time
	switch ev.Type {
	case runtype.EventToolCallReminder:
		e.Type = Reminder
		if c := ev.ToolCall; c != nil {
			due = c.RemindAt
		}
	case runtype.EventToolCallEscalated:
		e.Type = Escalated
		if c := ev.ToolCall; c != nil {
			due, e.EscalatedTo = c.EscalateAt, c.EscalateTo
		}
	default:
		e.Type = Expiring
		if c := ev.ToolCall; c != nil {
			due = c.ExpiringAt
		}
	}
	if due != nil {
		t := due.UTC().Truncate(time.Millisecond)
		e.DueAt = &t
	}
}

// RunURL is the run's page in the console at base ("" when base is "").
func RunURL(base, runID string) string {
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	u.Path = stripSlash(u.Path) + "/"
	u.RawQuery = url.Values{"run": {runID}}.Encode()
	return u.String()
}

func stripSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// ServerBase is the base URL of links to this server as request r reached it: the local
// address of r's connection (localhost when it listens on every address). Never r's Host
// header: a client, or whatever relays its request, could make a link point anywhere, and a
// script that opens it, or shows it to a person, would follow.
func ServerBase(r *http.Request) string {
	scheme, host := "http", "localhost"
	if r.TLS != nil {
		scheme = "https"
	}
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if local, port, err := net.SplitHostPort(addr.String()); err == nil {
			if ip := net.ParseIP(local); ip != nil && !ip.IsUnspecified() {
				host = ip.String()
			}
			host = net.JoinHostPort(host, port)
		}
	}
	return scheme + "://" + host
}
