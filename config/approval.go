package config

import (
	"fmt"
	"maps"
	"slices"

	"interlock/agent"
	"interlock/policy"
)

// Approval is a requireApproval: true (every call waits for a person), false (none does), or
// a CEL expression over the call that says, call by call, whether a person is asked (package
// policy: true asks; an error asks too). YAML's true and false are the plain values; a string
// is an expression ("true" in quotes is the expression true, which means the same).
type Approval struct {
	// Bool is the plain value, when Expr is "". (Not keys of the file: UnmarshalYAML reads a
	// requireApproval's value into them.)
	Bool bool `yaml:"-"`
	// Expr is the expression, "" for a plain value.
	Expr string `yaml:"-"`
	// bad is what was written when it was neither, reported by Load with its path.
	bad bool
}

// UnmarshalYAML accepts a bool or a string.
func (a *Approval) UnmarshalYAML(unmarshal func(any) error) error {
	*a = Approval{}
	var b bool
	if err := unmarshal(&b); err == nil {
		a.Bool = b
		return nil
	}
	if err := unmarshal(&a.Expr); err == nil {
		return nil
	}
	a.bad = true
	return nil
}

// problem checks a (at is its path): a bool, or an expression that compiles.
func (a Approval) problem(p *problems, at string) {
	if a.bad {
		p.add(at, "must be true, false, or a CEL expression in quotes (such as \"args.amount > 100\")")
		return
	}
	if a.Expr != "" {
		if _, err := policy.Compile(a.Expr, policy.Limits{}); err != nil {
			p.add(at, err.Error())
		}
	}
}

// apply sets a tool's approval from a (checked by Load).
func (a Approval) apply(t *agent.Tool) error {
	t.RequireApproval, t.Policy = a.Bool, nil
	if a.Expr == "" {
		return nil
	}
	pol, err := policy.Compile(a.Expr, policy.Limits{})
	if err != nil {
		return err
	}
	t.Policy = pol
	return nil
}

// or is the approval that asks whenever a or b asks: a tool of tools: that names an MCP
// server's tool takes its own requireApproval and the server's for that tool. A plain true
// wins; two expressions become one, (a) || (b), whose revision names both.
func (a Approval) or(b Approval) Approval {
	switch {
	case a.Expr == "" && a.Bool, b.Expr == "" && b.Bool:
		return Approval{Bool: true}
	case a.Expr == "":
		return b
	case b.Expr == "":
		return a
	}
	return Approval{Expr: "(" + a.Expr + ") || (" + b.Expr + ")"}
}

// ServerApproval is an MCP server's requireApproval: a list of the names of its tools whose
// calls wait for a person ("*": all of them), or a map from a tool's name to its
// requireApproval (true, false, or an expression), where "*" is that of every tool the map
// does not name.
type ServerApproval struct {
	// Rules are the names and their approvals, in the order of the list, or of the map's
	// names sorted.
	Rules []ServerRule `yaml:"-"`
	bad   bool
}

// ServerRule is one tool's requireApproval on its server.
type ServerRule struct {
	Tool     string
	Approval Approval
	// path is where it is written, after the server's requireApproval: "[1]" or ".refund".
	path string
}

// UnmarshalYAML accepts a list of names or a map of names to approvals.
func (s *ServerApproval) UnmarshalYAML(unmarshal func(any) error) error {
	*s = ServerApproval{}
	var names []string
	if err := unmarshal(&names); err == nil {
		for i, n := range names {
			s.Rules = append(s.Rules, ServerRule{Tool: n, Approval: Approval{Bool: true}, path: fmt.Sprintf("[%d]", i)})
		}
		return nil
	}
	var m map[string]Approval
	if err := unmarshal(&m); err != nil {
		s.bad = true
		return nil
	}
	for _, n := range slices.Sorted(maps.Keys(m)) {
		s.Rules = append(s.Rules, ServerRule{Tool: n, Approval: m[n], path: "." + n})
	}
	return nil
}

// problems checks the rules (at is the server's requireApproval's path).
func (s ServerApproval) problems(p *problems, at string) {
	if s.bad {
		p.add(at, `must be a list of the server's tool names ("*": all), or a map of tool names to true, false or a CEL expression`)
	}
	for _, r := range s.Rules {
		r.Approval.problem(p, at+r.path)
	}
}

// For is the requireApproval of the server's tool of that name: its own rule, else that of
// "*", else false.
func (s ServerApproval) For(tool string) Approval {
	var all *Approval
	for i, r := range s.Rules {
		switch r.Tool {
		case tool:
			return r.Approval
		case "*":
			all = &s.Rules[i].Approval
		}
	}
	if all != nil {
		return *all
	}
	return Approval{}
}
