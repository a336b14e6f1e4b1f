// Package model holds the GraphQL types gqlgen generates from schema.graphqls and the marshalling
// of the custom scalars DateTime and JSON.
package model

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"interlock/runtype"
)

// DateTimeLayout is how instants go out: RFC 3339, milliseconds, UTC.
const DateTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalDateTime writes an instant as RFC 3339 with milliseconds in UTC.
func MarshalDateTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		io.WriteString(w, strconv.Quote(t.UTC().Format(DateTimeLayout)))
	})
}

// UnmarshalDateTime reads an RFC 3339 instant with any offset. A bad value is BAD_USER_INPUT.
func UnmarshalDateTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, runtype.Errorf(runtype.CodeBadUserInput, "DateTime must be an RFC 3339 string such as 2026-12-02T10:00:00.000Z, not %v", v)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, runtype.Errorf(runtype.CodeBadUserInput, "%q is not an RFC 3339 DateTime such as 2026-12-02T10:00:00.000Z", s)
	}
	return t.UTC(), nil
}

// MarshalJSON writes any JSON value as it is.
func MarshalJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			io.WriteString(w, "null")
			return
		}
		w.Write(v)
	})
}

// UnmarshalJSON accepts any JSON value (numbers arrive as json.Number and keep their digits).
func UnmarshalJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "not a JSON value: %v", fmt.Sprint(v))
	}
	return b, nil
}
