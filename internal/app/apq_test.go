package app_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"interlock/internal/apptest"
)

// TestAutomaticPersistedQueries: Apollo's APQ protocol. A hash the server has not seen is
// PERSISTED_QUERY_NOT_FOUND; sent again with its query it runs and is kept; from then on the hash
// alone runs it, by POST and by GET. A query whose hash does not match is refused.
func TestAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "apq.db"))
	const query = `query Agents { agents { id name } }`
	sum := sha256.Sum256([]byte(query))
	hash := hex.EncodeToString(sum[:])

	for _, get := range []bool{false, true} {
		if r := apq(t, s, "", hash, get); r.Code() != "PERSISTED_QUERY_NOT_FOUND" {
			t.Fatalf("unknown hash (GET %v): code %q, errors %+v; want PERSISTED_QUERY_NOT_FOUND", get, r.Code(), r.Errors)
		}
	}
	if r := apq(t, s, query, hash, false); len(r.Errors) > 0 || !bytes.Contains(r.Data, []byte(`"support-agent"`)) {
		t.Fatalf("query with its hash: %s %+v", r.Data, r.Errors)
	}
	for _, get := range []bool{false, true} {
		if r := apq(t, s, "", hash, get); len(r.Errors) > 0 || !bytes.Contains(r.Data, []byte(`"support-agent"`)) {
			t.Fatalf("known hash alone (GET %v): %s %+v", get, r.Data, r.Errors)
		}
	}
	wrong := hex.EncodeToString(make([]byte, 32))
	if r := apq(t, s, query, wrong, false); len(r.Errors) == 0 || r.Data != nil && string(r.Data) != "null" {
		t.Fatalf("query with a hash that does not match: %s %+v; want an error", r.Data, r.Errors)
	}
	if r := apq(t, s, "", wrong, false); r.Code() != "PERSISTED_QUERY_NOT_FOUND" {
		t.Fatalf("a refused hash was kept: %q %+v", r.Code(), r.Errors)
	}
}

// apq sends an Apollo automatic persisted query to s: the hash always, the query text when
// given, by POST, or by GET (as Apollo's useGETForHashedQueries does) when get is set.
func apq(t *testing.T, s *apptest.Server, query, hash string, get bool) apptest.Response {
	t.Helper()
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}
	var resp *http.Response
	var err error
	if get {
		e, _ := json.Marshal(ext)
		v := url.Values{"extensions": {string(e)}}
		if query != "" {
			v.Set("query", query)
		}
		resp, err = http.Get(s.URL + "/graphql?" + v.Encode())
	} else {
		body := map[string]any{"extensions": ext}
		if query != "" {
			body["query"] = query
		}
		b, _ := json.Marshal(body)
		resp, err = http.Post(s.URL+"/graphql", "application/json", bytes.NewReader(b))
	}
	if err != nil {
		t.Fatal(err)
	}
	return apptest.DecodeGQL(t, resp)
}
