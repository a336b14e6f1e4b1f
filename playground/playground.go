// Package playground serves GraphiQL at /playground with every file it needs embedded in the
// binary (static/vendor, see its README for versions and licences), so that the page works
// offline and behind firewalls, and never loads a script from another site.
package playground

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// CSP is the page's Content-Security-Policy: scripts, styles and fetches from this server only
// (WebSocket included, for subscriptions). Styles may be inline, which GraphiQL's editor and
// components need; scripts may not.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves GraphiQL: the page at /playground and /playground/, its files under
// /playground/. The page talks to /graphql on the same origin.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	assets := http.StripPrefix("/playground/", http.FileServerFS(sub))
	page, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", CSP)
		if r.URL.Path == "/playground" || r.URL.Path == "/playground/" || r.URL.Path == "/playground/index.html" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			w.Write(page)
			return
		}
		assets.ServeHTTP(w, r)
	})
}
