package gqlhttp

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// The media types of the exchange.
const (
	// GraphQLResponse is the GraphQL-over-HTTP response type: its status codes say what happened
	// (4xx for a request error), because a client knows the body is GraphQL's whatever the status.
	GraphQLResponse = "application/graphql-response+json"
	// JSON is the legacy response type: a request error is 200 with the errors in the body,
	// because a client cannot tell a 4xx from GraphQL from a 4xx from a proxy (Apollo Client 3
	// turns it into a network error with no GraphQL errors).
	JSON = "application/json"
	// EventStream is Server-Sent Events, as graphql-sse speaks them.
	EventStream = "text/event-stream"
	// Multipart is incremental delivery (@defer) as multipart/mixed, as Apollo Client reads it.
	Multipart = "multipart/mixed"
	// PlainText is the reservation token of graphql-sse's single connection mode.
	PlainText = "text/plain"
)

// answerTypes are the representations of a query's or a mutation's result, in the server's
// order of preference among types the client likes equally: application/json first, so that a
// request without Accept, or with "*/*" (Apollo Client 3), is answered as the legacy type (the
// spec: "SHOULD treat the request as if it had Accept: application/json"; graphql-http's audit:
// "SHOULD accept */* and use application/json").
var answerTypes = []string{JSON, GraphQLResponse, EventStream, Multipart}

// mediaRange is one element of an Accept header.
type mediaRange struct {
	typ, sub string
	q        float64
	index    int // its place in the header: the earlier, the more preferred among equal q
}

// parseAccept reads the media ranges of the Accept headers; elements that do not parse are left
// out, as RFC 9110 lets a server do.
func parseAccept(headers []string) []mediaRange {
	var out []mediaRange
	for _, h := range headers {
		for part := range strings.SplitSeq(h, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(part)
			if err != nil {
				continue
			}
			typ, sub, ok := strings.Cut(mt, "/")
			if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil || q < 0 || q > 1 {
					continue
				}
			}
			out = append(out, mediaRange{typ: typ, sub: sub, q: q, index: len(out)})
		}
	}
	return out
}

// match is how well a range matches a media type: 3 exact, 2 type/*, 1 */*, 0 not at all.
// Parameters other than q are not compared: the server's types carry none that a client could
// ask for differently (Apollo's multipart/mixed;deferSpec=20220824 is the format served).
func (m mediaRange) match(typ, sub string) int {
	switch {
	case m.typ == typ && m.sub == sub:
		return 3
	case m.typ == typ && m.sub == "*":
		return 2
	case m.typ == "*":
		return 1
	}
	return 0
}

// Negotiate picks among offers the media type the Accept headers prefer (RFC 9110 12.5.1): each
// offer takes the q of the most specific range that matches it; the highest q wins, then the
// offer whose range comes first in the header, then the first offer. It returns "" when no offer
// is acceptable (every match has q=0, or none matches), and offers[0] without an Accept header.
//
// "Preferred" is the point: text/event-stream listed after application/json (urql's default
// Accept) is not a request for a stream.
func Negotiate(accept []string, offers ...string) string {
	if len(offers) == 0 {
		return ""
	}
	ranges := parseAccept(accept)
	if len(ranges) == 0 {
		if len(strings.TrimSpace(strings.Join(accept, ""))) == 0 {
			return offers[0]
		}
		return "" // an Accept header with nothing we can read accepts nothing we know
	}
	best, bestQ, bestIndex := "", 0.0, 0
	for _, offer := range offers {
		typ, sub, _ := strings.Cut(offer, "/")
		spec, q, index := 0, 0.0, 0
		for _, m := range ranges {
			if s := m.match(typ, sub); s > spec {
				spec, q, index = s, m.q, m.index
			}
		}
		if spec == 0 || q <= 0 {
			continue
		}
		if best == "" || q > bestQ || (q == bestQ && index < bestIndex) {
			best, bestQ, bestIndex = offer, q, index
		}
	}
	return best
}

// Names reports whether the Accept headers name typ itself with q > 0, preferred or not: "*/*"
// accepts a stream but does not ask for one, and a client sending only it (curl, Apollo Client
// 3) would take an event stream for a request that hangs.
func Names(accept []string, typ string) bool {
	t, sub, _ := strings.Cut(typ, "/")
	spec, q := 0, 0.0
	for _, m := range parseAccept(accept) {
		if s := m.match(t, sub); s > spec {
			spec, q = s, m.q
		}
	}
	return spec == 3 && q > 0
}

// ErrorType is the media type of an error answered before any GraphQL ran (401, 400, 413, 415):
// application/graphql-response+json when the client prefers it, application/json otherwise
// (including when it accepts neither: the server's choice, as the spec allows).
func ErrorType(r *http.Request) string {
	if Negotiate(r.Header.Values("Accept"), JSON, GraphQLResponse) == GraphQLResponse {
		return GraphQLResponse
	}
	return JSON
}
