package observe

import (
	"context"
	"strconv"
	"sync"

	"github.com/99designs/gqlgen/graphql"
)

// maxOperationNames is how many distinct operation names the metrics keep as labels; later
// names are counted as "other", so that clients cannot grow the number of series without end.
const maxOperationNames = 200

// maxLoggedName is the longest operation name written to the log as it is.
const maxLoggedName = 100

// OperationOf names the GraphQL operation of ctx as the logs write it: its name, the one the
// document gives or else the request's operationName ("anonymous" without either; cut at
// maxLoggedName, since a client chooses it), and its type ("query", "mutation",
// "subscription"; "unknown" before an operation is picked). The operation's own log line and
// the error presenter's log of what it hides (graph.PresentError) both use it, so that the
// two lines of one operation name it alike.
func OperationOf(ctx context.Context) (name, typ string) {
	name, typ = "anonymous", "unknown"
	if !graphql.HasOperationContext(ctx) {
		return name, typ
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.OperationName != "" {
		name = oc.OperationName
	}
	if oc.Operation != nil {
		typ = string(oc.Operation.Operation)
		if oc.Operation.Name != "" {
			name = oc.Operation.Name
		}
	}
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName] + "…"
	}
	return name, typ
}

// nameSet is the bounded set of operation names used as label values.
type nameSet struct {
	mu    sync.Mutex
	max   int
	names map[string]bool
}

func newNameSet(max int) *nameSet { return &nameSet{max: max, names: map[string]bool{}} }

// label returns name as a label value: itself when known or, when admit is true and there is
// room, after adding it; "other" otherwise. Only names of operations that passed validation
// are admitted, so that refused requests cannot fill the set.
func (s *nameSet) label(name string, admit bool) string {
	if name == "anonymous" {
		return name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names[name] {
		return name
	}
	if admit && len(s.names) < s.max {
		s.names[name] = true
		return name
	}
	return "other"
}

// validName reports whether s is a GraphQL name ([_A-Za-z][_0-9A-Za-z]*) of sensible length.
func validName(s string) bool {
	if s == "" || len(s) > maxLoggedName {
		return false
	}
	for i, c := range s {
		letter := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }
