package receipt_test

import (
	"strings"
	"testing"
	"time"

	"interlock/receipt"
)

// TestIDIsTheJTI: a signed receipt is named by its jti; text that is no JWS by its digest.
func TestIDIsTheJTI(t *testing.T) {
	t.Parallel()
	s := newSigner(t, &memKeys{}, &clock{now: t0.Add(2 * time.Second)})
	token, err := s.Sign(t.Context(), decision(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := s.Keys(t.Context())
	claims, err := receipt.Verify(token, set)
	if err != nil {
		t.Fatal(err)
	}
	if got := receipt.ID(token); got != claims.ID {
		t.Errorf("ID = %q, want the jti %q", got, claims.ID)
	}
	if got := receipt.ID("not a receipt"); !strings.HasPrefix(got, "sha256:") || len(got) != 7+64 || got == receipt.ID("not a receipt!") {
		t.Errorf("ID of text = %q, want a distinct sha256: digest", got)
	}
}
