package playground

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestEveryFileOfThePageIsServed: each script and stylesheet index.html names is served from
// the binary with its type and the page's CSP; the page is served at /playground and
// /playground/, to GET and HEAD only.
func TestEveryFileOfThePageIsServed(t *testing.T) {
	h := Handler()
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	page := get("GET", "/playground")
	if page.Code != http.StatusOK || page.Header().Get("Content-Security-Policy") != CSP || !strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /playground: %d %v", page.Code, page.Header())
	}
	if slash := get("GET", "/playground/"); slash.Code != http.StatusOK || slash.Body.String() != page.Body.String() {
		t.Errorf("GET /playground/: %d, not the page", slash.Code)
	}
	if post := get("POST", "/playground"); post.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /playground: %d, want 405", post.Code)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page.Body.String(), -1)
	if len(refs) < 6 {
		t.Fatalf("the page names %d files: %v", len(refs), refs)
	}
	for _, m := range refs {
		path := m[1]
		if !strings.HasPrefix(path, "/playground/") {
			t.Errorf("the page loads %s, not a file of its own", path)
			continue
		}
		rec := get("GET", path)
		want := "text/javascript"
		if strings.HasSuffix(path, ".css") {
			want = "text/css"
		}
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), want) || rec.Body.Len() == 0 {
			t.Errorf("GET %s: %d %q, %d bytes", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
	}
	if missing := get("GET", "/playground/vendor/nothing.js"); missing.Code != http.StatusNotFound {
		t.Errorf("an unknown file: %d, want 404", missing.Code)
	}
}
