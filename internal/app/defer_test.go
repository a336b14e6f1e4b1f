package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"interlock/internal/apptest"
)

// deferQuery defers a thread's runs, a field with its own resolver: gqlgen sends it in a later
// payload than the thread itself.
const deferQuery = `query($id: ID!) { thread(id: $id) { id ... @defer(label: "runs") { runs { total runs { id } } } } }`

// TestDeferIsDelivered: @defer, which the schema advertises, is honoured on every representation
// a client can ask for, and no deferred field is ever lost: as multipart/mixed (Apollo Client's
// deferSpec=20220824) and as an event stream the thread comes first with hasNext, then its runs
// in an incremental payload at the thread's path with the fragment's label; as one JSON
// document (a client that takes no stream) the runs are merged into the thread in their place.
// A deferred fragment of fields without resolvers (gqlgen defers only those) comes in the first
// payload, which @defer allows (a server SHOULD, not MUST, defer). Over SQLite and MySQL.
func TestDeferIsDelivered(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "hello", map[string]any{"threadId": "th-defer"})
		vars := map[string]any{"id": "th-defer"}

		// One JSON document: everything, merged, in the order selected.
		for _, accept := range []string{"", "application/json", acceptApollo4} {
			got := postAccept(t, s, accept, map[string]any{"query": deferQuery, "variables": vars})
			want := `{"data":{"thread":{"id":"th-defer","runs":{"total":1,"runs":[{"id":"` + run.ID + `"}]}}}}`
			if got.status != http.StatusOK || got.body != want {
				t.Errorf("as one document (Accept %q): %d %s\nwant %s", accept, got.status, got.body, want)
			}
		}

		// multipart/mixed: two parts.
		got := postAccept(t, s, "multipart/mixed;deferSpec=20220824,application/json", map[string]any{"query": deferQuery, "variables": vars})
		if got.status != http.StatusOK || !strings.HasPrefix(got.header.Get("Content-Type"), "multipart/mixed") || !strings.HasSuffix(got.body, "\r\n-----\r\n") {
			t.Fatalf("multipart: %d %q %q", got.status, got.header.Get("Content-Type"), got.body)
		}
		var parts []json.RawMessage
		for _, part := range strings.Split(strings.TrimSuffix(got.body, "\r\n-----\r\n"), "\r\n---\r\n")[1:] {
			head, body, ok := strings.Cut(part, "\r\n\r\n")
			if !ok || !strings.Contains(head, "application/json") {
				t.Fatalf("multipart part %q", part)
			}
			parts = append(parts, json.RawMessage(body))
		}
		checkDeferred(t, "multipart", parts, run.ID)

		// An event stream: the same payloads as next events.
		body, _ := json.Marshal(map[string]any{"query": deferQuery, "variables": vars})
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		st, refused := openSSEReader(t, req)
		if refused != nil {
			t.Fatalf("SSE: %d %s", refused.status, refused.body)
		}
		var events []json.RawMessage
		for ev := st.next(t); ev.Name != "complete"; ev = st.next(t) {
			events = append(events, ev.Data)
		}
		checkDeferred(t, "SSE", events, run.ID)

		// Fields without resolvers are not deferred: one payload, no hasNext.
		inline := postAccept(t, s, "multipart/mixed", map[string]any{"query": `{ agents { id ... @defer { name } } }`})
		if strings.Count(inline.body, "\r\n---\r\n") != 1 || strings.Contains(inline.body, "hasNext") || !strings.Contains(inline.body, `"name":"Support agent"`) {
			t.Errorf("a deferred fragment without resolvers: %q", inline.body)
		}
	})
}

// checkDeferred checks the payloads of deferQuery: the thread with hasNext, then its runs.
func checkDeferred(t *testing.T, how string, payloads []json.RawMessage, runID string) {
	t.Helper()
	if len(payloads) != 2 {
		t.Fatalf("%s: %d payloads, want 2: %s", how, len(payloads), payloads)
	}
	var first struct {
		Data struct {
			Thread struct{ ID string }
		}
		HasNext *bool
	}
	if err := json.Unmarshal(payloads[0], &first); err != nil || first.Data.Thread.ID != "th-defer" || first.HasNext == nil || !*first.HasNext {
		t.Fatalf("%s: the first payload %s, want the thread with hasNext", how, payloads[0])
	}
	var second struct {
		Incremental []struct {
			Data struct {
				Runs struct {
					Total int
					Runs  []struct{ ID string }
				}
			}
			Path  []any
			Label string
		}
		HasNext *bool
	}
	if err := json.Unmarshal(payloads[1], &second); err != nil || len(second.Incremental) != 1 || second.HasNext == nil || *second.HasNext {
		t.Fatalf("%s: the second payload %s, want one incremental result and hasNext false", how, payloads[1])
	}
	inc := second.Incremental[0]
	if inc.Label != "runs" || len(inc.Path) != 1 || inc.Path[0] != "thread" || inc.Data.Runs.Total != 1 || len(inc.Data.Runs.Runs) != 1 || inc.Data.Runs.Runs[0].ID != runID {
		t.Fatalf("%s: the deferred payload %s", how, payloads[1])
	}
}
