package storetest

import (
	"testing"

	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// finishInThread finishes a new run of the thread at second n with one question and answer.
func (f *fixture) finishInThread(thread string, resource *string, n int) *live {
	f.t.Helper()
	r := f.insert(runOpts{ThreadID: &thread, ResourceID: resource})
	fin := finishing(r, at(n))
	fin.ThreadID, fin.ResourceID = &thread, resource
	fin.Memory = []llm.Message{{Role: llm.RoleUser, Content: "question " + itoa(int64(n))}, {Role: llm.RoleAssistant, Content: "answer " + itoa(int64(n))}}
	if err := f.s.Finish(f.ctx, fin); err != nil {
		f.t.Fatal(err)
	}
	return r
}

func testThread(t *testing.T, open Opener) {
	// A thread is seen only by those who see its owner, and a thread of no resource only by
	// unscoped readers.
	each(t, open, "OnlyInAScopeOfItsOwner", func(t *testing.T, f *fixture) {
		f.finishInThread("thread-1", ptr("user-1"), 10)
		f.finishInThread("thread-1", ptr("user-1"), 20)
		f.finishInThread("thread-2", nil, 30)
		for _, scope := range [][]string{nil, {"user-1"}, {"user-2", "user-1"}} {
			th, err := f.s.Thread(f.ctx, "thread-1", scope, 0)
			if err != nil {
				t.Fatal(err)
			}
			if th == nil || th.MessageCount != 4 || th.Messages[0].Content != "question 10" || !sameStr(th.ResourceID, ptr("user-1")) {
				t.Fatalf("thread-1 in scope %q: %+v", scope, th)
			}
		}
		for _, scope := range [][]string{{"user-2"}, {}, {"user-1 "}, {"USER-1"}} {
			if th, err := f.s.Thread(f.ctx, "thread-1", scope, 0); err != nil || th != nil {
				t.Errorf("thread-1 in scope %q: %+v, %v; want nil", scope, th, err)
			}
		}
		if th, err := f.s.Thread(f.ctx, "thread-2", nil, 0); err != nil || th == nil || th.ResourceID != nil || th.MessageCount != 2 {
			t.Errorf("thread-2, unscoped: %+v, %v; want it, of no resource", th, err)
		}
		if th, err := f.s.Thread(f.ctx, "thread-2", []string{"user-1"}, 0); err != nil || th != nil {
			t.Errorf("thread-2 (no resource) in scope user-1: %+v, %v; want nil", th, err)
		}
	})

	// A thread whose first run has not finished is a thread already: it has its owner, and no
	// messages yet.
	each(t, open, "ClaimedThreadWithoutMessages", func(t *testing.T, f *fixture) {
		f.insert(runOpts{ThreadID: ptr("thread-1"), ResourceID: ptr("user-1")})
		th, err := f.s.Thread(f.ctx, "thread-1", []string{"user-1"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if th == nil || th.ID != "thread-1" || !sameStr(th.ResourceID, ptr("user-1")) || th.MessageCount != 0 || th.Messages == nil || len(th.Messages) != 0 {
			t.Fatalf("thread-1 before its first run finished: %+v; want user-1's, with no messages", th)
		}
		if th, err := f.s.Thread(f.ctx, "thread-1", []string{"user-2"}, 0); err != nil || th != nil {
			t.Errorf("thread-1 in scope user-2: %+v, %v; want nil", th, err)
		}
	})

	each(t, open, "MessagesOldestFirstWithCountTimesAndRuns", func(t *testing.T, f *fixture) {
		a := f.finishInThread("thread-1", ptr("user-1"), 10)
		b := f.finishInThread("thread-1", ptr("user-1"), 20)
		f.finishInThread("thread-2", ptr("user-1"), 30)
		th, err := f.s.Thread(f.ctx, "thread-1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if th == nil || th.ID != "thread-1" || th.ResourceID == nil || *th.ResourceID != "user-1" || th.MessageCount != 4 || len(th.Messages) != 4 {
			t.Fatalf("thread %+v", th)
		}
		if !th.CreatedAt.Equal(runtype.StoredTime(at(10))) || !th.UpdatedAt.Equal(runtype.StoredTime(at(20))) {
			t.Fatalf("created %s, updated %s; want %s, %s", th.CreatedAt, th.UpdatedAt, runtype.StoredTime(at(10)), runtype.StoredTime(at(20)))
		}
		want := []struct{ run, role, content string }{
			{a.ID, "user", "question 10"}, {a.ID, "assistant", "answer 10"}, {b.ID, "user", "question 20"}, {b.ID, "assistant", "answer 20"},
		}
		for i, m := range th.Messages {
			if m.RunID != want[i].run || string(m.Role) != want[i].role || m.Content != want[i].content {
				t.Fatalf("message %d: %+v, want %+v", i, m, want[i])
			}
		}
		th, err = f.s.Thread(f.ctx, "thread-1", nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		if th.MessageCount != 4 || len(th.Messages) != 3 || th.Messages[0].Content != "answer 10" {
			t.Fatalf("last 3: %+v", th)
		}
	})
	each(t, open, "UnknownThreadIsNil", func(t *testing.T, f *fixture) {
		f.finishInThread("thread-1", nil, 10)
		for _, id := range []string{"thread-9", "thread-1 ", "THREAD-1"} {
			th, err := f.s.Thread(f.ctx, id, nil, 0)
			if err != nil || th != nil {
				t.Fatalf("Thread(%q) = %+v, %v; want nil", id, th, err)
			}
		}
	})
}

func testThreads(t *testing.T, open Opener) {
	each(t, open, "MostRecentlyActiveFirstByResourcePaged", func(t *testing.T, f *fixture) {
		f.finishInThread("thread-a", ptr("user-1"), 10)
		f.finishInThread("thread-b", ptr("user-1"), 20)
		f.finishInThread("thread-c", ptr("user-2"), 30)
		f.finishInThread("thread-a", ptr("user-1"), 40)
		f.finishInThread("thread-d", nil, 50)
		for _, c := range []struct {
			p     runs.ThreadsParams
			want  []string
			total int64
		}{
			{runs.ThreadsParams{PerPage: 10}, []string{"thread-d", "thread-a", "thread-c", "thread-b"}, 4},
			{runs.ThreadsParams{ResourceID: ptr("user-1"), PerPage: 10}, []string{"thread-a", "thread-b"}, 2},
			{runs.ThreadsParams{ResourceID: ptr("user-1"), PerPage: 1, Page: 1}, []string{"thread-b"}, 2},
			{runs.ThreadsParams{ResourceID: ptr("user-1 "), PerPage: 10}, nil, 0},
			{runs.ThreadsParams{PerPage: 2, Page: 5}, nil, 4},
			{runs.ThreadsParams{Resources: []string{"user-2", "user-1"}, PerPage: 10}, []string{"thread-a", "thread-c", "thread-b"}, 3},
			{runs.ThreadsParams{Resources: []string{"user-1 "}, PerPage: 10}, nil, 0},
			{runs.ThreadsParams{Resources: []string{}, PerPage: 10}, nil, 0},
		} {
			list, total, err := f.s.Threads(f.ctx, c.p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, th := range list {
				got = append(got, th.ID)
			}
			if total != c.total || len(got) != len(c.want) || (len(got) > 0 && stringsOf(got) != stringsOf(c.want)) {
				t.Fatalf("Threads(%+v) = %v (total %d), want %v (total %d)", c.p, got, total, c.want, c.total)
			}
		}
		list, _, _ := f.s.Threads(f.ctx, runs.ThreadsParams{ResourceID: ptr("user-1"), PerPage: 10})
		if a := list[0]; a.MessageCount != 4 || !a.CreatedAt.Equal(runtype.StoredTime(at(10))) || !a.UpdatedAt.Equal(runtype.StoredTime(at(40))) || len(a.Messages) != 0 {
			t.Fatalf("thread-a summary %+v", a)
		}
	})
}

func stringsOf(s []string) string {
	out := ""
	for _, x := range s {
		out += x + ","
	}
	return out
}
