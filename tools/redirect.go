package tools

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects is how many redirects within the origin one request follows, as net/http's own
// default policy.
const maxRedirects = 10

// sameOriginRedirects is the redirect policy of every HTTP client of a tool (HTTP endpoints and
// MCP url servers): a redirect is followed only when it sends the same request again to the
// same origin, and refused otherwise, before anything is sent where it points. A tool's
// configured headers (an Authorization, an API key) and its arguments are meant for the origin
// it was configured with; net/http would re-send the body of a 307 or 308 to any host, and our
// headers are set on every request by the MCP transport, so another host would get both.
//
//   - The origin is the scheme, host and port of the request that was first sent (the configured
//     URL): a redirect that changes any of them (another host, another port on the same host,
//     https to http, http to https) is refused.
//   - Within the origin, a 307 or 308 is followed: the same method and body at another path (a
//     server mounted at /mcp/ redirecting /mcp). A 301, 302 or 303 of a POST is refused: net/http
//     would follow it as a GET without the body, a request without the call's arguments — not
//     the call a person approved. (A GET stays a GET, and is followed.)
//
// A refused redirect is a *RedirectError: the configured origin answered (with a redirect) and
// nothing was sent elsewhere, so the call's outcome is known — it did not run — and the model is
// told, as of any answer that is not the tool's (a non-2xx status).
//
// A redirect that is followed starts its request unsent (see delivery): the answer before it was
// the redirect, which says the request was not carried out there.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	first, last := via[0], via[len(via)-1]
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	e := &RedirectError{Status: status, From: origin(first.URL), To: req.URL}
	switch {
	case origin(req.URL) != e.From:
		e.Why = redirectOtherOrigin
	case req.Method != last.Method:
		e.Why = redirectDropsBody
	case len(via) >= maxRedirects:
		e.Why = redirectTooMany
	default:
		if d := deliveryOf(req.Context()); d != nil {
			d.sent.Store(false)
		}
		return nil
	}
	return e
}

// withRedirectPolicy is a copy of client (http.DefaultClient when nil) that follows redirects by
// sameOriginRedirects.
func withRedirectPolicy(client *http.Client) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = sameOriginRedirects
	return &c
}

// RedirectError is a redirect a tool's client refused (see sameOriginRedirects). Its message
// reads after the name of what answered: "the tool's endpoint answered HTTP 307, …".
type RedirectError struct {
	Status int      // the redirect's status (301, 302, 303, 307, 308)
	From   string   // the configured origin, as scheme://host:port
	To     *url.URL // where the redirect points
	Why    redirectRefusal
}

type redirectRefusal int

const (
	redirectOtherOrigin redirectRefusal = iota
	redirectDropsBody
	redirectTooMany
)

func (e *RedirectError) Error() string {
	switch e.Why {
	case redirectOtherOrigin:
		return fmt.Sprintf("answered HTTP %d, a redirect to another origin (%s), which Interlock does not follow: a tool's headers and arguments go only to its configured origin (%s)",
			e.Status, origin(e.To), e.From)
	case redirectDropsBody:
		return fmt.Sprintf("answered HTTP %d, a redirect to %s that would send the request again as a GET without its body, which Interlock does not follow; configure the URL it points to",
			e.Status, withoutQuery(e.To))
	default:
		return fmt.Sprintf("redirected %d times within %s (the last HTTP %d, to %s); Interlock stopped there", maxRedirects, e.From, e.Status, withoutQuery(e.To))
	}
}

// asRedirectError finds a refused redirect in err's chain.
func asRedirectError(err error) (*RedirectError, bool) {
	var e *RedirectError
	ok := errors.As(err, &e)
	return e, ok
}

// origin is u's scheme, host and port (the scheme's default port when u names none), as
// scheme://host:port, with no user information: what two URLs must share to be the same origin.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// withoutQuery is u within its origin, without user information, query or fragment: a
// redirect's target as an error message shows it (a query may hold a signed token).
func withoutQuery(u *url.URL) string {
	return origin(u) + u.EscapedPath()
}
