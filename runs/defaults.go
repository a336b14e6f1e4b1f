package runs

import "time"

// The defaults of the settings the server also exposes as flags: WithDefaults gives them to zero
// fields, and the server's settings table (internal/app/settings.go) takes its defaults from here,
// so each is written once.
const (
	DefaultMaxPerPage        = 500
	DefaultLeaseTTL          = 30 * time.Second
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultTextFlushInterval = 50 * time.Millisecond
	DefaultTextFlushBytes    = 1024
)
