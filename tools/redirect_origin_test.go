package tools

import (
	"net/url"
	"testing"
)

// TestOrigin: two URLs are the same origin when their scheme, host and port are, with a
// scheme's default port the same as none and the case of scheme and host ignored; user
// information, path and query never count.
func TestOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://api.example.com/refund", "http://api.example.com:80/v2?x=1", true},
		{"https://api.example.com/", "HTTPS://API.Example.COM:443/mcp/", true},
		{"http://user:pw@api.example.com/", "http://api.example.com/", true},
		{"http://[::1]:8080/", "http://[::1]:8080/mcp", true},
		{"http://api.example.com/", "https://api.example.com/", false},
		{"https://api.example.com/", "http://api.example.com:443/", false},
		{"http://api.example.com/", "http://api.example.com:8080/", false},
		{"http://api.example.com/", "http://evil.api.example.com/", false},
		{"http://127.0.0.1:8080/", "http://localhost:8080/", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := origin(a) == origin(b); got != c.same {
			t.Errorf("%s (%s) and %s (%s): same origin %v, want %v", c.a, origin(a), c.b, origin(b), got, c.same)
		}
	}
	u, _ := url.Parse("https://user:pw@API.example.com/v2/refund?sig=secret#top")
	if got := withoutQuery(u); got != "https://api.example.com:443/v2/refund" {
		t.Errorf("withoutQuery: %s", got)
	}
}
