package apptest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// Apq sends an Apollo automatic persisted query: the hash always, the query text when given,
// by POST, or by GET (as Apollo's useGETForHashedQueries does) when get is set.
func (s *Server) Apq(t *testing.T, query, hash string, get bool) Response {
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
	return DecodeGQL(t, resp)
}
