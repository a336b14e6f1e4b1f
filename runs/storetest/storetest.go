package storetest

import (
	"testing"

	"interlock/notify"
	"interlock/runs"
)

// Opener returns a new, empty store for one subtest: a fresh (or emptied) database, migrated,
// that no other subtest uses, released by t.Cleanup. The suite calls it from parallel subtests,
// once per subtest.
type Opener func(t *testing.T) runs.Store

// Run checks that the stores open returns keep every rule of the runs.Store contract: one
// subtest per method and per rule, each on a store of its own. It uses nothing but the
// interface, so it runs unchanged against every implementation.
func Run(t *testing.T, open Opener) {
	t.Helper()
	t.Run("InsertRun", func(t *testing.T) { testInsertRun(t, open) })
	t.Run("GetRun", func(t *testing.T) { testGetRun(t, open) })
	t.Run("Progress", func(t *testing.T) { testProgress(t, open) })
	t.Run("Events", func(t *testing.T) { testEvents(t, open) })
	t.Run("ThreadHistory", func(t *testing.T) { testThreadHistory(t, open) })
	t.Run("Thread", func(t *testing.T) { testThread(t, open) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open) })
	t.Run("ThreadOwner", func(t *testing.T) { testThreadOwner(t, open) })
	t.Run("IdempotencyKey", func(t *testing.T) { testIdempotencyKey(t, open) })
	t.Run("Checkpoint", func(t *testing.T) { testCheckpoint(t, open) })
	t.Run("ConcurrentWrites", func(t *testing.T) { testConcurrentWrites(t, open) })
	t.Run("Suspend", func(t *testing.T) { testSuspend(t, open) })
	t.Run("Finish", func(t *testing.T) { testFinish(t, open) })
	t.Run("RenewLease", func(t *testing.T) { testRenewLease(t, open) })
	t.Run("ReleaseLease", func(t *testing.T) { testReleaseLease(t, open) })
	t.Run("Decide", func(t *testing.T) { testDecide(t, open) })
	t.Run("KeepLease", func(t *testing.T) { testKeepLease(t, open) }) // questions asked in the middle of a call (keeplease.go)
	t.Run("SeveralCalls", func(t *testing.T) { testSeveralCalls(t, open) })
	t.Run("Delegate", func(t *testing.T) { testDelegate(t, open) })
	t.Run("ExpiresAt", func(t *testing.T) { testExpiresAt(t, open) })
	t.Run("DueExpiries", func(t *testing.T) { testDueExpiries(t, open) })
	t.Run("Expire", func(t *testing.T) { testExpire(t, open) })
	t.Run("FollowUp", func(t *testing.T) { testFollowUp(t, open) }) // reminders, escalation, expiry warnings (followup.go)
	t.Run("ExpiredRuns", func(t *testing.T) { testExpiredRuns(t, open) })
	t.Run("ClaimExpired", func(t *testing.T) { testClaimExpired(t, open) })
	t.Run("DeferRecovery", func(t *testing.T) { testDeferRecovery(t, open) })
	t.Run("LateResult", func(t *testing.T) { testLateResult(t, open) })
	t.Run("CountSuspended", func(t *testing.T) { testCountSuspended(t, open) })
	t.Run("ListSuspended", func(t *testing.T) { testListSuspended(t, open) })
	t.Run("Pages", func(t *testing.T) { testPages(t, open) })   // perf: pages.go
	t.Run("Counts", func(t *testing.T) { testCounts(t, open) }) // perf: pages.go
	t.Run("ListRecent", func(t *testing.T) { testListRecent(t, open) })
	t.Run("Changes", func(t *testing.T) { testChanges(t, open) })
	t.Run("PurgeFinished", func(t *testing.T) { testPurgeFinished(t, open) })
	t.Run("PurgeChanges", func(t *testing.T) { testPurgeChanges(t, open) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open) })
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, open) }) // notify's outbox (outbox.go)
	t.Run("CountByStatus", func(t *testing.T) { testCountByStatus(t, open) })
	t.Run("ExternalRequest", func(t *testing.T) { testExternalRequest(t, open) }) // approvals for external agents (external.go)
	t.Run("Receipts", func(t *testing.T) { testReceipts(t, open) })               // signing keys and receipts (receipts.go)
	t.Run("Grants", func(t *testing.T) { testGrants(t, open) })                   // remembered approvals (grants.go)
	t.Run("Policy", func(t *testing.T) { testPolicy(t, open) })                   // what is stored of the judgement of calls (policy.go)
	t.Run("RecordApproval", func(t *testing.T) { testRecordApproval(t, open) })   // a quorum's approvals (approvals.go)
	t.Run("Decisions", func(t *testing.T) { testDecisions(t, open) })             // the audit trail (decisions.go)
	t.Run("Claims", func(t *testing.T) { testClaims(t, open) })                   // "I'm on it" (team.go)
	t.Run("Search", func(t *testing.T) { testSearch(t, open) })                   // search of the listings (team.go)
	t.Run("SavedViews", func(t *testing.T) { testSavedViews(t, open) })           // saved views (team.go)
}

// each runs fn as a parallel subtest named name, on a fixture over a fresh store.
func each(t *testing.T, open Opener, name string, fn func(t *testing.T, f *fixture)) {
	t.Helper()
	eachWith(t, open, nil, name, fn)
}

// eachWith is each with webhooks: the fixture's writes carry the outbox rows that announce
// their events to them, as the run service decides them (runs.Announce).
func eachWith(t *testing.T, open Opener, webhooks []notify.Target, name string, fn func(t *testing.T, f *fixture)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		f := setup(t, open)
		f.webhooks = webhooks
		fn(t, f)
	})
}
