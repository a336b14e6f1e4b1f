package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/llm"
	"interlock/policy"
	"interlock/runtype"
)

// demoGreeting is the demo model's answer to a prompt it has no tool for: the output of every
// seeded completed run (the row test fails if the model's answer changes).
const demoGreeting = `Hello! I can look up an order's status, issue refunds (a person approves each one) and ask you for details. Try "refund order 42 for 30".`

// seedParams shape the seeded data set. Every run is a pure function of its index and these,
// so a seed can be repeated or resumed and gives the same rows.
type seedParams struct {
	Runs, Suspended, Threads, Resources, Agents, Days int
	// End is the creation time of the newest run; runs are spread evenly over Days before it.
	End time.Time
	// Chunk is how many runs are written per transaction (the unit of resuming).
	Chunk int
}

// runSpec is what the service is asked for (a startRun) and what it then stores.
type runSpec struct {
	Index      int
	ID         string
	AgentID    string
	ThreadID   string
	ResourceID string
	Prompt     string
	CreatedAt  time.Time
	// Suspended runs asked for a refund and wait for its approval; the others completed with
	// the demo model's greeting.
	Suspended bool
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// spec returns run i of the data set: agent and thread drawn from a fixed hash of i (a thread
// belongs to one resource), creation times evenly spread and increasing with i, and exactly
// Suspended of the Runs runs suspended, evenly spread in time.
func (p seedParams) spec(i int) runSpec {
	h := splitmix(uint64(i))
	thread := int((h >> 20) % uint64(p.Threads))
	span := time.Duration(p.Days) * 24 * time.Hour
	created := p.End.Add(-span).Add(time.Duration(int64(span) / int64(p.Runs) * int64(i))).UTC().Truncate(time.Millisecond)
	s := runSpec{
		Index:      i,
		ID:         uuidV7(created, splitmix(h)),
		AgentID:    agentID(int(h % uint64(p.Agents))),
		ThreadID:   fmt.Sprintf("thread-%d", thread),
		ResourceID: fmt.Sprintf("resource-%d", thread%p.Resources),
		CreatedAt:  created,
		Suspended:  (int64(i)+1)*int64(p.Suspended)/int64(p.Runs) > int64(i)*int64(p.Suspended)/int64(p.Runs),
	}
	if s.Suspended {
		s.Prompt = fmt.Sprintf("refund order %d for %d", 1000+i, 5+i%95)
	} else {
		s.Prompt = fmt.Sprintf("hello, customer %d", i)
	}
	return s
}

// uuidV7 makes a time-ordered id like the service's (uuid.NewV7) for the instant t, with
// random bits taken from r so that the same run always gets the same id.
func uuidV7(t time.Time, r uint64) string {
	var b [16]byte
	msec := uint64(t.UnixMilli())
	binary.BigEndian.PutUint64(b[:8], msec<<16|r>>48)
	b[6] = 0x70 | b[6]&0x0f
	binary.BigEndian.PutUint64(b[8:], splitmix(r))
	b[8] = 0x80 | b[8]&0x3f
	return uuid.UUID(b).String()
}

// seedRows are the rows of one or more runs, as gormstore's models.
type seedRows struct {
	Runs     []gormstore.Run
	Calls    []gormstore.ToolCall
	Events   []gormstore.Event
	Messages []gormstore.Message
}

// rowsOf builds the rows the run service stores for s when the demo model answers it: for a
// refund, the suspended run with its snapshot, its pending call and four events; otherwise the
// completed run, three events and its two memory messages. Times follow the service's steps a
// millisecond apart. Suspended-set changes are not written: retention removes them within
// minutes of a suspension, and nothing reads old ones.
func rowsOf(s runSpec, into *seedRows) error {
	t0, t1, t2 := s.CreatedAt, s.CreatedAt.Add(time.Millisecond), s.CreatedAt.Add(2*time.Millisecond)
	thread, resource := s.ThreadID, s.ResourceID
	evs := []runtype.Event{{Type: runtype.EventRunStarted, Status: "RUNNING", At: t0}}
	r := gormstore.Run{
		ID: s.ID, AgentID: s.AgentID, ThreadID: &thread, ResourceID: &resource, Prompt: s.Prompt,
		CreatedAt: t0, Version: 1,
	}
	if s.Suspended {
		order, amount := 1000+s.Index, 5+s.Index%95
		args, err := json.Marshal(map[string]any{"orderId": fmt.Sprint(order), "amount": float64(amount)})
		if err != nil {
			return err
		}
		call := llm.ToolCall{ID: "call_1", Name: "issue_refund", Args: args}
		// issue_refund's requireApproval is true: the judgement runs.judge stores with the call.
		gate := agent.Gate{Ask: true, Reason: "requireApproval is true: every call of the tool waits for a person", Revision: policy.Revision("true")}
		snap := agent.Snapshot{
			Messages: []llm.Message{{Role: llm.RoleUser, Content: s.Prompt}, {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}},
			Pending:  []agent.PendingCall{{ToolCall: call, ServerID: "tc_1", State: agent.CallAwaitingApproval, Gate: &gate}},
			Seq:      4,
			CallIDs:  1,
		}
		raw, err := json.Marshal(snap)
		if err != nil {
			return err
		}
		snapshot, argText := string(raw), string(args)
		tc := &runtype.ToolCall{ToolCallID: "tc_1", ToolName: call.Name, Args: args, RequiresApproval: true, PolicyRevision: gate.Revision}
		waiting := *tc
		waiting.ApprovalReason = gate.Reason
		evs = append(evs,
			runtype.Event{Type: runtype.EventToolCallRequested, ToolCall: tc, At: t1},
			runtype.Event{Type: runtype.EventToolCallApproval, ToolCall: &waiting, At: t2},
			runtype.Event{Type: runtype.EventRunSuspended, Status: "SUSPENDED", At: t2})
		r.Status, r.Snapshot, r.UpdatedAt, r.SuspendedAt = "SUSPENDED", &snapshot, t2, &t2
		into.Calls = append(into.Calls, gormstore.ToolCall{
			RunID: s.ID, ToolCallID: tc.ToolCallID, ToolName: call.Name, Args: &argText, RequiresApproval: true,
			State: gormstore.ToolCallPending, CreatedAt: t2, ApprovalReason: &gate.Reason, PolicyRevision: &gate.Revision,
		})
	} else {
		out := demoGreeting
		evs = append(evs,
			runtype.Event{Type: runtype.EventTextDelta, Text: demoGreeting, At: t1},
			runtype.Event{Type: runtype.EventRunFinished, Status: "COMPLETED", At: t1})
		r.Status, r.Output, r.UpdatedAt = "COMPLETED", &out, t1
		into.Messages = append(into.Messages,
			gormstore.Message{ThreadID: thread, ResourceID: &resource, RunID: s.ID, Role: string(llm.RoleUser), Content: s.Prompt, CreatedAt: t1},
			gormstore.Message{ThreadID: thread, ResourceID: &resource, RunID: s.ID, Role: string(llm.RoleAssistant), Content: demoGreeting, CreatedAt: t1})
	}
	r.LastSeq = int64(len(evs))
	into.Runs = append(into.Runs, r)
	for i, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		into.Events = append(into.Events, gormstore.Event{RunID: s.ID, Seq: int64(i) + 1, Type: string(ev.Type), Data: string(data), CreatedAt: ev.At})
	}
	return nil
}

// insertBatch is how many rows one INSERT carries: under MySQL's 65,535 placeholders and
// SQLite's 32,766 for the widest table (agent_runs, 23 columns).
const insertBatch = 1000

// writeRows inserts rows in one transaction, with multi-row INSERTs.
func writeRows(ctx context.Context, db *gorm.DB, rows *seedRows) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.CreateInBatches(rows.Runs, insertBatch).Error; err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		if len(rows.Calls) > 0 {
			if err := tx.CreateInBatches(rows.Calls, insertBatch).Error; err != nil {
				return fmt.Errorf("insert tool calls: %w", err)
			}
		}
		if err := tx.CreateInBatches(rows.Events, insertBatch).Error; err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		if len(rows.Messages) > 0 {
			if err := tx.CreateInBatches(rows.Messages, insertBatch).Error; err != nil {
				return fmt.Errorf("insert messages: %w", err)
			}
		}
		// Each thread's owner, as its first run claims it through the store: the runs come in
		// creation order, and a thread an earlier chunk claimed keeps its row.
		var threads []gormstore.Thread
		seen := map[string]bool{}
		for _, r := range rows.Runs {
			if r.ThreadID != nil && !seen[*r.ThreadID] {
				seen[*r.ThreadID] = true
				threads = append(threads, gormstore.Thread{ID: *r.ThreadID, ResourceID: r.ResourceID, CreatedAt: r.CreatedAt})
			}
		}
		if len(threads) > 0 {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(threads, insertBatch).Error; err != nil {
				return fmt.Errorf("insert threads: %w", err)
			}
		}
		return nil
	})
}

// seed writes the data set p into db, chunk by chunk, each chunk in one transaction. A chunk
// whose last run is already stored is skipped, so an interrupted seed resumes where it stopped
// and a repeated one changes nothing.
func seed(ctx context.Context, db *gorm.DB, p seedParams, progress io.Writer) error {
	start := time.Now()
	written, skipped := 0, 0
	last := time.Now()
	for from := 0; from < p.Runs; from += p.Chunk {
		to := min(from+p.Chunk, p.Runs)
		var n int64
		if err := db.WithContext(ctx).Model(&gormstore.Run{}).Where("id = ?", p.spec(to-1).ID).Count(&n).Error; err != nil {
			return fmt.Errorf("check chunk at run %d: %w", from, err)
		}
		if n > 0 {
			skipped += to - from
			continue
		}
		var rows seedRows
		for i := from; i < to; i++ {
			if err := rowsOf(p.spec(i), &rows); err != nil {
				return fmt.Errorf("build run %d: %w", i, err)
			}
		}
		if err := writeRows(ctx, db, &rows); err != nil {
			return fmt.Errorf("write runs %d–%d: %w", from, to-1, err)
		}
		written += to - from
		if time.Since(last) > 2*time.Second || to == p.Runs {
			last = time.Now()
			rate := float64(written) / time.Since(start).Seconds()
			eta := time.Duration(float64(p.Runs-to) / rate * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(progress, "seed: %d/%d runs (%d written, %d already there), %.0f runs/s, eta %s\n", to, p.Runs, written, skipped, rate, eta)
		}
	}
	// The bulk path writes around the store, so the maintained counts are rebuilt from the
	// rows (every time: a seed that was interrupted may have written chunks since).
	if err := gormstore.RecountSuspended(ctx, db); err != nil {
		return err
	}
	fmt.Fprintf(progress, "seed: done, %d runs written and %d already there in %s\n", written, skipped, time.Since(start).Round(time.Millisecond))
	if db.Dialector.Name() == gormstore.DialectMySQL && written > 0 {
		// Fresh statistics, so the optimizer sees the table as it now is.
		for _, t := range []string{"agent_runs", "run_tool_calls", "run_events", "messages"} {
			if err := db.WithContext(ctx).Exec("ANALYZE TABLE " + t).Error; err != nil {
				return fmt.Errorf("analyze %s: %w", t, err)
			}
		}
	}
	return nil
}
