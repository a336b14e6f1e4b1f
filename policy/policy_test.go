package policy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"interlock/policy"
)

func compile(t *testing.T, expr string, l policy.Limits) *policy.Policy {
	t.Helper()
	p, err := policy.Compile(expr, l)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	return p
}

func TestCompileRefusesWhatCannotBeAPolicy(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"":                        "empty",
		"args.amount >":           "Syntax error",
		"'ask'":                   "not a bool",
		"tool == 1":               "no matching overload",
		"run.resourceID == 'x'":   `run has no field "resourceID"`,
		"has(principal.role)":     `principal has no field "role"`,
		"arg.amount > 1":          "undeclared reference to 'arg'",
		"run.resourceId + 1 == 2": "no matching overload",
		strings.Repeat("a", 5000): "at most 4096",
	} {
		_, err := policy.Compile(expr, policy.Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%.40q) = %v, want an error with %q", expr, err, want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := policy.Input{Args: json.RawMessage(`{"amount":150.5,"id":9007199254740993,"items":[1,2,3]}`), Tool: "issue_refund", Agent: "support",
		ResourceID: "vip-7", StartedBy: "alice", Principal: &policy.Principal{Subject: "bob", Roles: []string{"requester"}}}
	for expr, want := range map[string]bool{
		"true": true, "false": false,
		"args.amount > 100 || run.resourceId.startsWith('vip-')": true,
		"args.amount > 200":                            false,
		"args.id == 9007199254740993":                  true, // integers stay exact
		"args.items.exists(i, i > 2)":                  true,
		"tool == 'issue_refund' && agent == 'support'": true,
		"'requester' in principal.roles":               true,
		"has(run.threadId)":                            false,
		"run.startedBy == principal.subject":           false,
	} {
		got, err := compile(t, expr, policy.Limits{}).Evaluate(ctx, in)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
}

// What is not known is an error, never a value: the caller asks a person.
func TestEvaluateErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		expr string
		in   policy.Input
		want string
	}{
		{"args.amount > 100", policy.Input{Args: json.RawMessage(`{}`)}, "no such key: amount"},
		{"args.amount > 100", policy.Input{Args: json.RawMessage(`{"amount":"a lot"}`)}, "no such overload"},
		{"run.resourceId.startsWith('vip-')", policy.Input{Args: json.RawMessage(`{}`)}, "no such key: resourceId"},
		{"'eu' in principal.resources", policy.Input{Args: json.RawMessage(`{}`), Principal: &policy.Principal{Subject: "admin"}}, "no such key: resources"},
		{"principal.subject == 'bob'", policy.Input{Args: json.RawMessage(`{}`)}, "no such key: subject"},
		{"true", policy.Input{Args: json.RawMessage(`[1]`)}, "not a JSON object"},
		{"true", policy.Input{Args: json.RawMessage(`{"a":"` + strings.Repeat("x", policy.MaxArgsBytes) + `"}`)}, "a policy reads at most"},
	} {
		got, err := compile(t, c.expr, policy.Limits{}).Evaluate(ctx, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s over %.60s = %v, %v; want an error with %q", c.expr, c.in.Args, got, err, c.want)
		}
	}
}

func TestEvaluateCostLimit(t *testing.T) {
	t.Parallel()
	big := make([]int, 3000)
	args, _ := json.Marshal(map[string]any{"items": big})
	p := compile(t, "args.items.map(x, args.items.map(y, x * y)).size() > 0", policy.Limits{Deadline: time.Minute})
	_, err := p.Evaluate(context.Background(), policy.Input{Args: args})
	if err == nil || !strings.Contains(err.Error(), "exceeded its cost limit") {
		t.Fatalf("err = %v, want the cost limit", err)
	}
}

func TestEvaluateDeadline(t *testing.T) {
	t.Parallel()
	big := make([]int, 3000)
	args, _ := json.Marshal(map[string]any{"items": big})
	p := compile(t, "args.items.map(x, args.items.map(y, x * y)).size() > 0", policy.Limits{Cost: 1 << 62, Deadline: time.Millisecond})
	_, err := p.Evaluate(context.Background(), policy.Input{Args: args})
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err = %v, want the deadline", err)
	}
}

func TestRevision(t *testing.T) {
	t.Parallel()
	p := compile(t, "args.amount > 100", policy.Limits{})
	sum := sha256.Sum256([]byte("args.amount > 100"))
	if p.Revision() != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("revision %q", p.Revision())
	}
	if p.Revision() != policy.Revision("args.amount > 100") || p.Revision() == policy.Revision("args.amount > 101") || p.Source() != "args.amount > 100" {
		t.Fatal("the revision is not the digest of the text")
	}
}
