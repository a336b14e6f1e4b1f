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

// TestSlackMessagePurgedWithItsRun: retention's purge of a finished run removes its Slack
// message rows (and its claims) in the same transaction, so neither table grows without bound.
func TestSlackMessagePurgedWithItsRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s, ctx := gormstore.New(db), t.Context()
		old := time.Now().UTC().Add(-time.Hour)
		if err := db.Create(&gormstore.Run{ID: "run-1", AgentID: "a", Prompt: "p", Status: "COMPLETED", CreatedAt: old, UpdatedAt: old}).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Create(&gormstore.RunClaimRow{RunID: "run-1", Subject: "rita", ClaimedAt: old, ExpiresAt: old}).Error; err != nil {
			t.Fatal(err)
		}
		if ok, err := s.ReserveSlackMessage(ctx, "slack", "run-1", "tc_1", time.Hour); err != nil || !ok {
			t.Fatalf("reserve = %v, %v", ok, err)
		}
		if err := s.SetSlackMessage(ctx, "slack", "run-1", "tc_1", slackapp.Message{Channel: "C1", TS: "1.2"}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PurgeFinished(ctx, time.Now(), time.Now(), 10); err != nil || n != 1 {
			t.Fatalf("PurgeFinished = %d, %v; want the run purged", n, err)
		}
		for _, table := range []string{"slack_messages", "run_claims"} {
			var left int64
			if err := db.Table(table).Where("run_id = ?", "run-1").Count(&left).Error; err != nil || left != 0 {
				t.Errorf("%s rows of the purged run: %d, %v; want none", table, left, err)
			}
		}
	})
}
