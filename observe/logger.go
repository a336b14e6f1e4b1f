package observe

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// Log formats, as --log-format / INTERLOCK_LOG_FORMAT name them.
const (
	LogAuto = "auto"
	LogJSON = "json"
	LogText = "text"
)

// CheckLogFormat reports an unknown log format.
func CheckLogFormat(format string) error {
	switch format {
	case LogAuto, LogJSON, LogText:
		return nil
	}
	return fmt.Errorf("%q is not auto, json or text", format)
}

// ParseLogLevel reads a level: debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// NewLogger returns the server's logger on w: JSON lines for a log collector, or text for a
// person. "auto" picks text when w is a terminal and JSON otherwise (a container, a pipe, a
// file).
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == LogText || (format == LogAuto && isTerminal(w)) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
