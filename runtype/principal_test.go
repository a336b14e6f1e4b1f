package runtype_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"interlock/runtype"
)

func TestPrincipalRoles(t *testing.T) {
	t.Parallel()
	p := &runtype.Principal{Roles: []runtype.Role{"refunds"}}
	if !p.Has(runtype.RoleViewer) || p.Has(runtype.RoleOperator) || !p.Has("refunds") || p.Has("payroll") {
		t.Errorf("a custom role grants viewer and itself only")
	}
	a := &runtype.Principal{Roles: []runtype.Role{runtype.RoleApprover}}
	if !a.Has(runtype.RoleViewer) || !a.Has(runtype.RoleOperator) || !a.Has(runtype.RoleApprover) || a.Has(runtype.RoleAdmin) || a.Has("refunds") {
		t.Errorf("approver includes viewer and operator, not admin nor custom roles")
	}
	if !a.HasAny([]runtype.Role{"refunds", runtype.RoleOperator}) || a.HasAny([]runtype.Role{"refunds", runtype.RoleAdmin}) {
		t.Errorf("HasAny: one of the roles is enough, none is not")
	}
	if (&runtype.Principal{}).Has(runtype.RoleViewer) {
		t.Errorf("no role grants nothing")
	}
	s := &runtype.Principal{Resources: []string{"r1"}}
	r1 := "r1"
	r2 := "r2"
	if !s.Sees(&r1) || s.Sees(&r2) || s.Sees(nil) || !(&runtype.Principal{}).Sees(nil) {
		t.Errorf("Sees: a scoped principal sees only its resources, never runs without one")
	}
	for _, r := range []runtype.Role{runtype.RoleViewer, runtype.RoleOperator, runtype.RoleApprover, runtype.RoleAdmin} {
		if !r.Builtin() {
			t.Errorf("%s is built in", r)
		}
	}
	if runtype.Role("refunds").Builtin() {
		t.Errorf("refunds is a custom role")
	}
}

// The requester asks for approvals and reads its own requests: it is no viewer (it lists
// nothing), no custom role (which would let it decide), and operators and above hold it.
func TestRequesterRole(t *testing.T) {
	t.Parallel()
	req := &runtype.Principal{Roles: []runtype.Role{runtype.RoleRequester}}
	if !req.Has(runtype.RoleRequester) || req.Has(runtype.RoleViewer) || req.Has(runtype.RoleOperator) || req.Has(runtype.RoleApprover) || req.Has("refunds") {
		t.Errorf("a requester holds the requester role only")
	}
	if !runtype.RoleRequester.Builtin() {
		t.Errorf("requester is built in, not a custom role (custom roles may decide)")
	}
	for _, r := range []runtype.Role{runtype.RoleOperator, runtype.RoleApprover, runtype.RoleAdmin} {
		if !(&runtype.Principal{Roles: []runtype.Role{r}}).Has(runtype.RoleRequester) {
			t.Errorf("%s holds the requester role", r)
		}
	}
	for _, r := range []runtype.Role{runtype.RoleViewer, "refunds"} {
		if (&runtype.Principal{Roles: []runtype.Role{r}}).Has(runtype.RoleRequester) {
			t.Errorf("%s does not hold the requester role", r)
		}
	}
}

// The server's own principals hold every role and are recorded as nobody; an authenticated one
// is recorded by its subject, whatever that subject says.
func TestPrincipalsRecorded(t *testing.T) {
	t.Parallel()
	for _, p := range []*runtype.Principal{runtype.System(), runtype.Anonymous()} {
		if p.Authenticated() || p.Recorded() != nil || !p.Has(runtype.RoleAdmin) {
			t.Errorf("%s: authenticated %v, recorded %v, admin %v; want false, nil, true", p.Subject, p.Authenticated(), p.Recorded(), p.Has(runtype.RoleAdmin))
		}
	}
	impostor := &runtype.Principal{Subject: "system", Roles: []runtype.Role{runtype.RoleAdmin}}
	if !impostor.Authenticated() || impostor.Recorded() == nil || *impostor.Recorded() != "system" {
		t.Errorf("a token whose subject is system is an authenticated principal, recorded as system")
	}
	var none *runtype.Principal
	if none.Recorded() != nil {
		t.Errorf("no principal is recorded as nobody")
	}
}

func TestPrincipalOfAContext(t *testing.T) {
	t.Parallel()
	if runtype.PrincipalFrom(context.Background()) != nil {
		t.Fatalf("a bare context acts for nobody")
	}
	alice := &runtype.Principal{Subject: "alice"}
	if got := runtype.PrincipalFrom(runtype.WithPrincipal(context.Background(), alice)); got != alice {
		t.Errorf("PrincipalFrom(WithPrincipal(alice)) = %v", got)
	}
	if got := runtype.PrincipalFrom(runtype.WithSystem(context.Background())); got == nil || got.Authenticated() || got.Subject != "system" {
		t.Errorf("WithSystem acts for %v, want the system principal", got)
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("deciding: %w", runtype.Errorf(runtype.CodeConflict, "run %s moved", "r1"))
	if runtype.ErrorCode(err) != runtype.CodeConflict || err.Error() != "deciding: run r1 moved" {
		t.Errorf("a wrapped application error keeps its code and message: %v %q", runtype.ErrorCode(err), err)
	}
	if runtype.ErrorCode(errors.New("disk on fire")) != runtype.CodeInternal {
		t.Errorf("any other error is INTERNAL")
	}
	down := runtype.Unavailable(errors.New("dial tcp: connection refused"))
	if !errors.Is(down, runtype.ErrUnavailable) || runtype.ErrorCode(down) != runtype.CodeUnavailable {
		t.Errorf("Unavailable: errors.Is %v, code %s", errors.Is(down, runtype.ErrUnavailable), runtype.ErrorCode(down))
	}
	if again := runtype.Unavailable(down); again != down || runtype.Unavailable(nil) != nil {
		t.Errorf("Unavailable wraps once, and nil stays nil")
	}
}
