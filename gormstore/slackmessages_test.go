package gormstore_test

import (
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/slackapp"
)

// TestSlackMessageReservedOnce: of two reservations of a call's message one wins; a failed post
// releases it for a retry; a posted message is read back; a reservation left without a message
// is taken over only once stale.
func TestSlackMessageReservedOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s, ctx := gormstore.New(db), t.Context()
		reserve := func(stale time.Duration) bool {
			t.Helper()
			ok, err := s.ReserveSlackMessage(ctx, "slack", "run-1", "tc_1/tc_2", stale)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !reserve(time.Hour) || reserve(time.Hour) {
			t.Fatal("want the first reservation alone to win")
		}
		if m, err := s.SlackMessage(ctx, "slack", "run-1", "tc_1/tc_2"); err != nil || m != nil {
			t.Fatalf("a reservation without a post reads as %+v, %v; want none", m, err)
		}
		if err := s.ReleaseSlackMessage(ctx, "slack", "run-1", "tc_1/tc_2"); err != nil {
			t.Fatal(err)
		}
		if !reserve(time.Hour) {
			t.Fatal("a released reservation is not taken again")
		}
		time.Sleep(20 * time.Millisecond)
		if !reserve(time.Millisecond) {
			t.Fatal("a stale reservation is not taken over")
		}
		want := slackapp.Message{Channel: "C0001", TS: "1700000000.000001"}
		if err := s.SetSlackMessage(ctx, "slack", "run-1", "tc_1/tc_2", want); err != nil {
			t.Fatal(err)
		}
		if m, err := s.SlackMessage(ctx, "slack", "run-1", "tc_1/tc_2"); err != nil || m == nil || *m != want {
			t.Fatalf("message = %+v, %v; want %+v", m, err, want)
		}
		if err := s.ReleaseSlackMessage(ctx, "slack", "run-1", "tc_1/tc_2"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if reserve(time.Millisecond) {
			t.Fatal("a posted message was reserved again")
		}
		if other, _ := s.ReserveSlackMessage(ctx, "other", "run-1", "tc_1/tc_2", time.Hour); !other {
			t.Fatal("another webhook's reservation of the same call is refused")
		}
	})
}
