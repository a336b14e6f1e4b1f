package storetest

import (
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

func testChanges(t *testing.T, open Opener) {
	each(t, open, "AtOrAfterSinceByOtherInstancesInIDOrder", func(t *testing.T, f *fixture) {
		// Times are the callers' and instances' clocks differ, so they need not grow with ids.
		a := f.insert(runOpts{})
		r := f.suspend(a, approval("call-1"), at(30), "inst-A")
		d := decision(r, runtype.DecisionApproved, "lease-2", at(20))
		d.InstanceID = "inst-B"
		f.decide(r, d)
		b := f.insert(runOpts{})
		f.suspend(b, approval("call-1"), at(25), "inst-A")

		all := f.changes()
		if len(all) != 3 {
			t.Fatalf("changes = %+v, want 3", all)
		}
		want := []struct {
			run  string
			kind runs.ChangeKind
			at   time.Time
		}{{a.ID, runs.ChangeSuspended, at(30)}, {a.ID, runs.ChangeLeft, at(20)}, {b.ID, runs.ChangeSuspended, at(25)}}
		for i, w := range want {
			if all[i].RunID != w.run || all[i].Kind != w.kind {
				t.Errorf("change %d = %+v, want %s %s", i, all[i], w.kind, w.run)
			}
			wantTime(t, "change time", all[i].At, w.at)
			if i > 0 && all[i].ID <= all[i-1].ID {
				t.Errorf("change ids %d, %d: not in id order", all[i-1].ID, all[i].ID)
			}
		}
		for _, c := range []struct {
			name  string
			since time.Time
			not   string
			want  []int // indexes into all
		}{
			{"since the start, all instances", time.Time{}, "other", []int{0, 1, 2}},
			{"since 25s, inclusive", runtype.StoredTime(at(25)), "other", []int{0, 2}},
			{"since just after 25s", runtype.StoredTime(at(25)).Add(time.Millisecond), "other", []int{0}},
			{"after every change", runtype.StoredTime(at(31)), "other", nil},
			{"not by inst-A", time.Time{}, "inst-A", []int{1}},
			{"not by inst-B", time.Time{}, "inst-B", []int{0, 2}},
		} {
			got, err := f.s.Changes(f.ctx, c.since, c.not)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Errorf("Changes(%s) = %+v, want %d changes", c.name, got, len(c.want))
				continue
			}
			for i, j := range c.want {
				if got[i].ID != all[j].ID {
					t.Errorf("Changes(%s)[%d] = change %d, want %d", c.name, i, got[i].ID, all[j].ID)
				}
			}
		}
	})
}

func testPurgeChanges(t *testing.T, open Opener) {
	each(t, open, "DeletesChangesRecordedBeforeCutoff", func(t *testing.T, f *fixture) {
		for _, n := range []int{10, 20, 30} {
			f.suspended(runOpts{CreatedAt: at(n)}) // the change is recorded at the suspension, at createdAt
		}
		if err := f.s.PurgeChanges(f.ctx, runtype.StoredTime(at(20))); err != nil {
			t.Fatal(err)
		}
		got := f.changes()
		if len(got) != 2 || !got[0].At.Equal(runtype.StoredTime(at(20))) || !got[1].At.Equal(runtype.StoredTime(at(30))) {
			t.Fatalf("changes after PurgeChanges(20s) = %+v, want those at 20s and 30s", got)
		}
		if err := f.s.PurgeChanges(f.ctx, runtype.StoredTime(at(31))); err != nil {
			t.Fatal(err)
		}
		if got := f.changes(); len(got) != 0 {
			t.Errorf("changes after PurgeChanges(31s) = %+v, want none", got)
		}
		n, err := f.s.CountSuspended(f.ctx, runs.ListSuspendedParams{})
		if err != nil || n != 3 {
			t.Errorf("suspended runs after PurgeChanges = %d, %v; want 3 (changes are not runs)", n, err)
		}
	})
}
