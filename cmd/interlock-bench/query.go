package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/runs"
)

// shape is one suspendedRuns query of the issue: its arguments, as GraphQL variables and as
// the run service hands them to the store.
type shape struct {
	Name string
	Vars map[string]any
}

// shapes are the measured queries over a data set of p: one agent; one agent and thread; one
// agent, resource and week; the whole inbox (every top-level run) at page 0 and a deep page
// (default 1,000) of 50; and a small unpaginated answer (one agent's runs of one thread).
func shapes(p seedParams, deep int) []shape {
	week := p.End.Add(-7 * 24 * time.Hour)
	return []shape{
		{"agent, page 0 of 50", map[string]any{"agentId": agentID(0), "page": 0, "perPage": 50}},
		{"agent + thread, page 0 of 50", map[string]any{"agentId": agentID(0), "threadId": "thread-7", "page": 0, "perPage": 50}},
		{"agent + resource + 7 days, page 0 of 50", map[string]any{"agentId": agentID(0), "resourceId": "resource-7", "fromDate": week.Format(time.RFC3339Nano), "toDate": p.End.Format(time.RFC3339Nano), "page": 0, "perPage": 50}},
		{"inbox, page 0 of 50", map[string]any{"page": 0, "perPage": 50}},
		{fmt.Sprintf("inbox, page %d of 50", deep), map[string]any{"page": deep, "perPage": 50}},
		{"agent + thread, unpaginated", map[string]any{"agentId": agentID(0), "threadId": "thread-7"}},
	}
}

// suspendedQuery is what a client of the inbox asks: the page and, per run, what the console
// shows of it.
const suspendedQuery = `query($agentId: ID, $threadId: ID, $resourceId: ID, $fromDate: DateTime, $toDate: DateTime, $page: Int, $perPage: Int) {
  suspendedRuns(agentId: $agentId, threadId: $threadId, resourceId: $resourceId, fromDate: $fromDate, toDate: $toDate, page: $page, perPage: $perPage) {
    total
    runs { runId agentId threadId resourceId status prompt createdAt suspendedAt lastEventSeq toolCalls { toolCallId toolName args requiresApproval } }
  }
}`

// params is the store's view of a shape, as runs.Service.ListSuspended computes it.
func (s shape) params() (runs.ListSuspendedParams, int, int) {
	var p runs.ListSuspendedParams
	str := func(k string) *string {
		if v, ok := s.Vars[k].(string); ok {
			return &v
		}
		return nil
	}
	tm := func(k string) *time.Time {
		if v := str(k); v != nil {
			t, _ := time.Parse(time.RFC3339Nano, *v)
			t = t.UTC().Truncate(time.Millisecond)
			return &t
		}
		return nil
	}
	p.AgentID, p.ThreadID, p.ResourceID, p.FromDate, p.ToDate = str("agentId"), str("threadId"), str("resourceId"), tm("fromDate"), tm("toDate")
	limit, offset := runs.Config{}.WithDefaults().MaxUnpaginated+1, 0
	if page, ok := s.Vars["page"].(int); ok {
		per := s.Vars["perPage"].(int)
		p.Page, p.PerPage = &page, &per
		limit, offset = per, page*per
	}
	return p, limit, offset
}

// statement is one SQL statement the store issued, with its arguments.
type statement struct {
	SQL  string
	Vars []any
}

// recorder captures the statements a gorm.DB runs, through a query callback.
type recorder struct {
	mu    sync.Mutex
	stmts []statement
}

// install records on db's queries (Find, Count) and row reads (Scan, Pluck).
func (r *recorder) install(db *gorm.DB) error {
	record := func(tx *gorm.DB) {
		if tx.DryRun {
			return // a subquery being built into its statement, not run on its own
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stmts = append(r.stmts, statement{SQL: tx.Statement.SQL.String(), Vars: append([]any(nil), tx.Statement.Vars...)})
	}
	if err := db.Callback().Query().After("gorm:query").Register("bench:record", record); err != nil {
		return err
	}
	return db.Callback().Row().After("gorm:row").Register("bench:record", record)
}

func (r *recorder) take() []statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.stmts
	r.stmts = nil
	return out
}

// storeStatements are the statements the store runs for sh, in order: the count, then (when
// the page is not past the end) the page and its runs' tool calls, as the service does.
func storeStatements(ctx context.Context, st *gormstore.Store, rec *recorder, sh shape) ([]statement, int64, error) {
	p, limit, offset := sh.params()
	rec.take()
	total, err := st.CountSuspended(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	if int64(offset) < total {
		if _, err := st.ListSuspended(ctx, p, limit, offset); err != nil {
			return nil, 0, err
		}
	}
	return rec.take(), total, nil
}

// timeStatements runs the statements once on one connection, reading every row.
func timeStatements(ctx context.Context, conn *sql.DB, stmts []statement) (time.Duration, error) {
	start := time.Now()
	for _, s := range stmts {
		rows, err := conn.QueryContext(ctx, s.SQL, s.Vars...)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.SQL, err)
		}
		cols, _ := rows.Columns()
		dst := make([]any, len(cols))
		for i := range dst {
			dst[i] = new(sql.RawBytes)
		}
		for rows.Next() {
			if err := rows.Scan(dst...); err != nil {
				rows.Close()
				return 0, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// explain returns the plan of each statement, as the database prints it.
func explain(ctx context.Context, conn *sql.DB, dialect string, stmts []statement) (string, error) {
	prefix := "EXPLAIN "
	if dialect == gormstore.DialectSQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	var b strings.Builder
	for _, s := range stmts {
		fmt.Fprintf(&b, "%s\n", inline(s))
		rows, err := conn.QueryContext(ctx, prefix+s.SQL, s.Vars...)
		if err != nil {
			return "", fmt.Errorf("explain %s: %w", s.SQL, err)
		}
		cols, _ := rows.Columns()
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.Join(cols, "\t"))
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			dst := make([]any, len(cols))
			for i := range vals {
				dst[i] = &vals[i]
			}
			if err := rows.Scan(dst...); err != nil {
				rows.Close()
				return "", err
			}
			cells := make([]string, len(cols))
			for i, v := range vals {
				cells[i] = "NULL"
				if v.Valid {
					cells[i] = v.String
				}
			}
			fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
		}
		rows.Close()
		tw.Flush()
	}
	return b.String(), nil
}

// inline shows a statement with its arguments in place, for reading (not for running).
func inline(s statement) string {
	out := s.SQL
	for _, v := range s.Vars {
		var lit string
		switch x := v.(type) {
		case string:
			lit = "'" + strings.ReplaceAll(x, "'", "''") + "'"
		case time.Time:
			lit = "'" + x.UTC().Format("2006-01-02 15:04:05.000") + "'"
		case []string:
			q := make([]string, len(x))
			for i, e := range x {
				q[i] = "'" + e + "'"
			}
			lit = strings.Join(q, ",")
		default:
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
				lit = "'" + rv.String() + "'"
			} else {
				lit = fmt.Sprint(x)
			}
		}
		out = strings.Replace(out, "?", lit, 1)
	}
	return out
}

// shapeResult is one row of the query table.
type shapeResult struct {
	Shape     string  `json:"shape"`
	Total     int64   `json:"total"`
	HTTPp50ms float64 `json:"http_p50_ms"`
	HTTPp99ms float64 `json:"http_p99_ms"`
	SQLp50ms  float64 `json:"sql_p50_ms"`
	SQLp99ms  float64 `json:"sql_p99_ms"`
	// ServerCPUms is the server's CPU time per request (user and system, its collector's
	// included), and GCsPer100 its garbage collections per 100 requests, over the measured
	// requests: what the server itself spends, apart from the waits on the database.
	ServerCPUms float64 `json:"server_cpu_ms"`
	GCsPer100   float64 `json:"gcs_per_100_requests"`
	Explain     string  `json:"explain,omitempty"`
}

// measureQueries times each shape over HTTP against srv and, alternately in the same loop, the
// store's own statements for it straight on the database (the floor).
func measureQueries(ctx context.Context, db *gorm.DB, srv *server, p seedParams, deep, iterations int, withExplain bool, log io.Writer) ([]shapeResult, error) {
	rec := &recorder{}
	capture := db.Session(&gorm.Session{NewDB: true})
	if err := rec.install(capture); err != nil {
		return nil, err
	}
	defer capture.Callback().Query().Remove("bench:record")
	defer capture.Callback().Row().Remove("bench:record")
	st := gormstore.New(capture)
	conn, err := db.DB()
	if err != nil {
		return nil, err
	}
	client := newGQLClient(srv.URL)
	var out []shapeResult
	for _, sh := range shapes(p, deep) {
		stmts, total, err := storeStatements(ctx, st, rec, sh)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sh.Name, err)
		}
		r := shapeResult{Shape: sh.Name, Total: total}
		if withExplain {
			if r.Explain, err = explain(ctx, conn, db.Dialector.Name(), stmts); err != nil {
				return nil, err
			}
		}
		var httpTimes, sqlTimes []time.Duration
		var cpu0, gcs0 float64
		warm := max(iterations/10, 3)
		for i := 0; i < warm+iterations; i++ {
			if i == warm {
				if cpu0, gcs0, err = srv.Counters(ctx); err != nil {
					return nil, err
				}
			}
			var resp struct {
				SuspendedRuns struct {
					Total int64
					Runs  []struct{ RunID string }
				}
			}
			dh, err := client.timed(ctx, suspendedQuery, sh.Vars, &resp)
			if err != nil {
				return nil, fmt.Errorf("%s over HTTP: %w", sh.Name, err)
			}
			if resp.SuspendedRuns.Total != total {
				return nil, fmt.Errorf("%s: the server's total %d differs from the store's %d", sh.Name, resp.SuspendedRuns.Total, total)
			}
			ds, err := timeStatements(ctx, conn, stmts)
			if err != nil {
				return nil, err
			}
			if i >= warm {
				httpTimes, sqlTimes = append(httpTimes, dh), append(sqlTimes, ds)
			}
		}
		cpu1, gcs1, err := srv.Counters(ctx)
		if err != nil {
			return nil, err
		}
		r.ServerCPUms, r.GCsPer100 = (cpu1-cpu0)*1000/float64(iterations), (gcs1-gcs0)*100/float64(iterations)
		r.HTTPp50ms, r.HTTPp99ms = pct(httpTimes, 50), pct(httpTimes, 99)
		r.SQLp50ms, r.SQLp99ms = pct(sqlTimes, 50), pct(sqlTimes, 99)
		fmt.Fprintf(log, "query: %s: total %d, HTTP p50 %.2f ms, SQL p50 %.2f ms\n", sh.Name, total, r.HTTPp50ms, r.SQLp50ms)
		out = append(out, r)
	}
	return out, nil
}

// pct is the q-th percentile of ds in milliseconds (nearest rank).
func pct(ds []time.Duration, q int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*q + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// printQueries writes the table of results.
func printQueries(w io.Writer, rs []shapeResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\ttotal\tHTTP p50 ms\tHTTP p99 ms\tSQL p50 ms\tSQL p99 ms\tp50 ×SQL\tp99 ×SQL\tserver CPU ms\tGCs/100\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t\n", r.Shape, r.Total, r.HTTPp50ms, r.HTTPp99ms, r.SQLp50ms, r.SQLp99ms, ratio(r.HTTPp50ms, r.SQLp50ms), ratio(r.HTTPp99ms, r.SQLp99ms), r.ServerCPUms, r.GCsPer100)
	}
	tw.Flush()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
