package run_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"interlock/run"
)

func TestPrincipalRoles(t *testing.T) {
	t.Parallel()
	p := &run.Principal{Roles: []run.Role{"refunds"}}
	if !p.Has(run.RoleViewer) || p.Has(run.RoleOperator) || !p.Has("refunds") || p.Has("payroll") {
		t.Errorf("a custom role grants viewer and itself only")
	}
	a := &run.Principal{Roles: []run.Role{run.RoleApprover}}
	if !a.Has(run.RoleViewer) || !a.Has(run.RoleOperator) || !a.Has(run.RoleApprover) || a.Has(run.RoleAdmin) || a.Has("refunds") {
		t.Errorf("approver includes viewer and operator, not admin nor custom roles")
	}
	if !a.HasAny([]run.Role{"refunds", run.RoleOperator}) || a.HasAny([]run.Role{"refunds", run.RoleAdmin}) {
		t.Errorf("HasAny: one of the roles is enough, none is not")
	}
	if (&run.Principal{}).Has(run.RoleViewer) {
		t.Errorf("no role grants nothing")
	}
	s := &run.Principal{Resources: []string{"r1"}}
	r1 := "r1"
	r2 := "r2"
	if !s.Sees(&r1) || s.Sees(&r2) || s.Sees(nil) || !(&run.Principal{}).Sees(nil) {
		t.Errorf("Sees: a scoped principal sees only its resources, never runs without one")
	}
	for _, r := range []run.Role{run.RoleViewer, run.RoleOperator, run.RoleApprover, run.RoleAdmin} {
		if !r.Builtin() {
			t.Errorf("%s is built in", r)
		}
	}
	if run.Role("refunds").Builtin() {
		t.Errorf("refunds is a custom role")
	}
}

// The requester asks for approvals and reads its own requests: it is no viewer (it lists
// nothing), no custom role (which would let it decide), and operators and above hold it.
func TestRequesterRole(t *testing.T) {
	t.Parallel()
	req := &run.Principal{Roles: []run.Role{run.RoleRequester}}
	if !req.Has(run.RoleRequester) || req.Has(run.RoleViewer) || req.Has(run.RoleOperator) || req.Has(run.RoleApprover) || req.Has("refunds") {
		t.Errorf("a requester holds the requester role only")
	}
	if !run.RoleRequester.Builtin() {
		t.Errorf("requester is built in, not a custom role (custom roles may decide)")
	}
	for _, r := range []run.Role{run.RoleOperator, run.RoleApprover, run.RoleAdmin} {
		if !(&run.Principal{Roles: []run.Role{r}}).Has(run.RoleRequester) {
			t.Errorf("%s holds the requester role", r)
		}
	}
	for _, r := range []run.Role{run.RoleViewer, "refunds"} {
		if (&run.Principal{Roles: []run.Role{r}}).Has(run.RoleRequester) {
			t.Errorf("%s does not hold the requester role", r)
		}
	}
}

// The server's own principals hold every role and are recorded as nobody; an authenticated one
// is recorded by its subject, whatever that subject says.
func TestPrincipalsRecorded(t *testing.T) {
	t.Parallel()
	for _, p := range []*run.Principal{run.System(), run.Anonymous()} {
		if p.Authenticated() || p.Recorded() != nil || !p.Has(run.RoleAdmin) {
			t.Errorf("%s: authenticated %v, recorded %v, admin %v; want false, nil, true", p.Subject, p.Authenticated(), p.Recorded(), p.Has(run.RoleAdmin))
		}
	}
	impostor := &run.Principal{Subject: "system", Roles: []run.Role{run.RoleAdmin}}
	if !impostor.Authenticated() || impostor.Recorded() == nil || *impostor.Recorded() != "system" {
		t.Errorf("a token whose subject is system is an authenticated principal, recorded as system")
	}
	var none *run.Principal
	if none.Recorded() != nil {
		t.Errorf("no principal is recorded as nobody")
	}
}

func TestPrincipalOfAContext(t *testing.T) {
	t.Parallel()
	if run.PrincipalFrom(context.Background()) != nil {
		t.Fatalf("a bare context acts for nobody")
	}
	alice := &run.Principal{Subject: "alice"}
	if got := run.PrincipalFrom(run.WithPrincipal(context.Background(), alice)); got != alice {
		t.Errorf("PrincipalFrom(WithPrincipal(alice)) = %v", got)
	}
	if got := run.PrincipalFrom(run.WithSystem(context.Background())); got == nil || got.Authenticated() || got.Subject != "system" {
		t.Errorf("WithSystem acts for %v, want the system principal", got)
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("deciding: %w", run.Errorf(run.CodeConflict, "run %s moved", "r1"))
	if run.ErrorCode(err) != run.CodeConflict || err.Error() != "deciding: run r1 moved" {
		t.Errorf("a wrapped application error keeps its code and message: %v %q", run.ErrorCode(err), err)
	}
	if run.ErrorCode(errors.New("disk on fire")) != run.CodeInternal {
		t.Errorf("any other error is INTERNAL")
	}
	down := run.Unavailable(errors.New("dial tcp: connection refused"))
	if !errors.Is(down, run.ErrUnavailable) || run.ErrorCode(down) != run.CodeUnavailable {
		t.Errorf("Unavailable: errors.Is %v, code %s", errors.Is(down, run.ErrUnavailable), run.ErrorCode(down))
	}
	if again := run.Unavailable(down); again != down || run.Unavailable(nil) != nil {
		t.Errorf("Unavailable wraps once, and nil stays nil")
	}
}
