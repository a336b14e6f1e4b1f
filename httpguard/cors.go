package httpguard

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"

	"interlock/gqlhttp"
)

// CORSMaxAge is how long a browser may cache a preflight answer, in seconds.
const CORSMaxAge = 600

// CORS lets the browser pages of origins (exact origins such as https://console.example.com)
// call next cross-origin: GET, POST and OPTIONS, and PUT and DELETE for graphql-sse's single
// connection streams, sending Authorization, Content-Type and the stream token header. It sends
// no Access-Control-Allow-Credentials, so browsers send no cookies cross-origin; a token goes in
// the Authorization header, which needs none. With no origins it returns next as it is, and no
// answer carries Access-Control-Allow-Origin: rs/cors itself would allow every origin then.
// Preflights are answered here (204) and never reach next.
func CORS(next http.Handler, origins []string) http.Handler {
	if len(origins) == 0 {
		return next
	}
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodOptions, http.MethodPut, http.MethodDelete},
		AllowedHeaders: []string{"Authorization", "Content-Type", gqlhttp.TokenHeader},
		MaxAge:         CORSMaxAge,
	}).Handler(next)
}

// CheckOrigin reports what is wrong with o as a CORS origin, or nil: it must be an exact origin,
// scheme (http or https) and host with an optional port, nothing else. "*" is refused: an
// approval service is called from pages its operator names, not from any site its users visit.
func CheckOrigin(o string) error {
	if o == "*" || strings.Contains(o, "*") {
		return fmt.Errorf("%q: wildcards are not allowed; list each origin, such as https://console.example.com", o)
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an origin such as https://console.example.com (scheme and host, optional port, no path)", o)
	}
	return nil
}
