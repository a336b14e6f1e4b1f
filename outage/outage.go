// Package outage logs the failures of a background loop as changes of state. A loop that polls
// storage every 50 ms would otherwise log a line per poll for as long as the database is down
// (some 1,900 lines in 45 s), burying the one line that matters; this logs when the loop starts
// failing, a summary every so often while it keeps failing, and when it works again.
package outage

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultSummaryEvery is how often a Log repeats, while its loop keeps failing, that it does.
const DefaultSummaryEvery = 30 * time.Second

// Log is the failure log of one loop. Its zero value with Logger and Name set is ready; it is
// safe for concurrent use.
type Log struct {
	// Logger receives the lines. Required.
	Logger *slog.Logger
	// Name says which loop, as the start of each line ("notify: poll").
	Name string
	// SummaryEvery is how often a summary is logged while the loop keeps failing. Default
	// DefaultSummaryEvery.
	SummaryEvery time.Duration
	// NowFunc is the clock. Default time.Now.
	NowFunc func() time.Time

	mu          sync.Mutex
	failing     bool
	since       time.Time // when the loop started failing
	lastSummary time.Time
	failures    int // since it started failing
}

// Fail records a failure of the loop: logged (at warning level) when it is the first since the
// loop last worked, or when a summary is due; counted otherwise.
func (l *Log) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.failing {
		l.failing, l.since, l.lastSummary, l.failures = true, now, now, 1
		l.Logger.Warn(l.Name+": failing; a summary follows every "+l.every().String()+" while it lasts", "err", err)
		return
	}
	l.failures++
	if now.Sub(l.lastSummary) >= l.every() {
		l.lastSummary = now
		l.Logger.Warn(l.Name+": still failing", "for", now.Sub(l.since).Round(time.Second).String(),
			"failures", l.failures, "err", err)
	}
}

// OK records that the loop worked: logged (at info level) when it had been failing.
func (l *Log) OK() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failing {
		return
	}
	l.failing = false
	l.Logger.Info(l.Name+": working again", "after", l.now().Sub(l.since).Round(time.Millisecond).String(),
		"failures", l.failures)
}

// Failing reports whether the loop's last attempt failed.
func (l *Log) Failing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing
}

func (l *Log) every() time.Duration {
	if l.SummaryEvery > 0 {
		return l.SummaryEvery
	}
	return DefaultSummaryEvery
}

func (l *Log) now() time.Time {
	if l.NowFunc != nil {
		return l.NowFunc()
	}
	return time.Now()
}
