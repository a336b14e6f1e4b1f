// Package apptest runs the real application for the tests of other packages (internal/app's API
// tests, web's browser tests, deploy's): the app over a fresh SQLite file or MySQL database on
// 127.0.0.1 (Start, EachDB, AuthServer; server.go, auth.go) or the built binary as a process
// (StartProc; process.go), a client for its API over POST, SSE and both WebSocket protocols
// (graphql.go, auth.go, sse.go, ws.go), the coding-agent hooks' client (hooks.go), fixtures
// (fake models, model.go; an HTTP tool's backend and configs, fixtures.go; a locked table,
// outage.go), and waits on what a test needs (waits.go, metrics.go).
//
// It holds what several test packages share; a helper one package's tests use lives in that
// package's test files. Importing it has no side effect: the test configs it writes name no
// environment variable (the fake models take no API key).
package apptest
