package gormstore

import (
	"log/slog"
	"sync"
	"time"
)

// driverLogEvery is how often the MySQL driver's lines are logged at most, a count of those left
// out following.
const driverLogEvery = 30 * time.Second

// throttledLog logs the driver's lines at most once per driverLogEvery. While the database is
// unreachable the driver says "unexpected EOF" or "bad connection" for every query the server
// makes (the notify poll alone makes two every 50 ms); the service logs the outage itself
// (outage.Log), so the driver's lines need only show what it says, now and then.
type throttledLog struct {
	log *slog.Logger

	mu      sync.Mutex
	last    time.Time // when a line was last logged
	dropped int       // lines left out since
}

func (l *throttledLog) warn(msg, message string) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < driverLogEvery {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Warn(msg, "message", message, "linesLeftOut", dropped)
		return
	}
	l.log.Warn(msg, "message", message)
}
