package gqlguard

import (
	"context"
	"time"
)

// CloseUnauthenticated is the close code of a WebSocket whose credentials are missing, refused,
// or expired (graphql-transport-ws: 4401 Unauthorized). Clients do not retry it with the same
// credentials: graphql-ws treats it as fatal, and the console asks for a new token.
const CloseUnauthenticated = 4401

// CloseAt closes the WebSocket connection that ctx (a context of the transport's InitFunc, or of
// an operation on the connection) belongs to, with code and reason, at the instant at (at once
// when it is past), unless the connection ended before. It reports whether ctx belongs to a
// connection of a Websocket transport.
//
// This is how a socket lasts no longer than its token: gqlgen ends a socket whose context ends
// with 1000 "terminated", which clients take for a dropped connection and reconnect at once.
func CloseAt(ctx context.Context, at time.Time, code int, reason string) bool {
	slot, ok := ctx.Value(acceptedKey{}).(**guardedConn)
	if !ok || *slot == nil {
		return false
	}
	c := *slot
	timer := time.AfterFunc(time.Until(at), func() { c.closeWith(code, reason) })
	context.AfterFunc(ctx, func() { timer.Stop() })
	return true
}
