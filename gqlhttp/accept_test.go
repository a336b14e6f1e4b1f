package gqlhttp

import "testing"

// TestNegotiate: the media type chosen is the one Accept prefers among those offered, by the
// q of its most specific match, then by its place in the header, then by the offer's order.
func TestNegotiate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accept []string
		want   string
	}{
		{nil, JSON},
		{[]string{""}, JSON},
		{[]string{"*/*"}, JSON},
		{[]string{"application/*"}, JSON},
		{[]string{"application/json"}, JSON},
		{[]string{"application/graphql-response+json"}, GraphQLResponse},
		{[]string{"application/graphql-response+json, application/json;q=0.9"}, GraphQLResponse},
		{[]string{"application/json, application/graphql-response+json"}, JSON},
		{[]string{"application/json;q=0.8, application/graphql-response+json;q=0.9"}, GraphQLResponse},
		{[]string{"application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed"}, GraphQLResponse},
		{[]string{"text/event-stream"}, EventStream},
		{[]string{"text/*"}, EventStream},
		{[]string{"text/event-stream;q=0.1, */*;q=0.2"}, JSON},
		{[]string{"*/*;q=0.2, text/event-stream;q=0.1"}, JSON},
		{[]string{"*/*, application/json;q=0"}, GraphQLResponse},
		{[]string{"multipart/mixed;deferSpec=20220824,application/json"}, Multipart},
		{[]string{"text/html"}, ""},
		{[]string{"application/json;q=0"}, ""},
		{[]string{"garbage"}, ""},
		{[]string{"text/html", "application/json"}, JSON}, // two header lines
		{[]string{"application/json;q=2"}, ""},            // not a q-value: the range is ignored
	} {
		if got := Negotiate(tc.accept, answerTypes...); got != tc.want {
			t.Errorf("Accept %q: %q, want %q", tc.accept, got, tc.want)
		}
	}
}

// TestNames: a stream is asked for only by naming it; "*/*" accepts it without asking.
func TestNames(t *testing.T) {
	t.Parallel()
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"text/*":                              false,
		"text/event-stream":                   true,
		"application/json, text/event-stream": true,
		"text/event-stream;q=0":               false,
		"text/event-stream;q=0, */*":          false,
	} {
		if got := Names([]string{accept}, EventStream); got != want {
			t.Errorf("Accept %q names text/event-stream: %v, want %v", accept, got, want)
		}
	}
}
