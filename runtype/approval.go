package runtype

import (
	"encoding/json"
	"time"
)

// Approvals are the approvals recorded on one waiting call whose tool needs several from
// distinct people (a quorum: the tool's approvals.required): who approved which arguments,
// and when. The call runs when the last required approval arrives; an approval of other
// arguments (edited ones) starts a new round, in which only the approvals of those arguments
// count.
type Approvals struct {
	// Required is how many approvals the call needs, when the writer knew it (the events'
	// calls); 0 on a call read from storage, whose tool's configuration says it.
	Required int `json:"required,omitempty"`
	// Round is the current round: 0 for the model's arguments, one more each time an approval
	// of other arguments reset the count.
	Round int `json:"round"`
	// Args are the arguments the current round approves: the model's, or those the approval
	// that started the round edited.
	Args json.RawMessage `json:"args,omitempty"`
	// By are the approvals of the current round, oldest first: those that count.
	By []Approval `json:"by"`
	// Superseded are the approvals of earlier rounds, oldest first: they approved other
	// arguments and no longer count. Kept for the audit.
	Superseded []Approval `json:"superseded,omitempty"`
}

// Count is how many approvals count towards the quorum.
func (a *Approvals) Count() int {
	if a == nil {
		return 0
	}
	return len(a.By)
}

// Approval is one person's recorded approval of a call.
type Approval struct {
	Subject string    `json:"subject"`
	At      time.Time `json:"at"`
	Round   int       `json:"round"`
	// ArgsDigest is "sha256:" and the hex SHA-256 of the canonical arguments it approved.
	ArgsDigest string `json:"argsDigest"`
	// EditedArgs are the arguments it approved in place of the model's, when they were edited.
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
}
