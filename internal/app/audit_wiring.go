package app

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"interlock/audit"
	"interlock/auth"
)

// auditExport is the handler of GET /audit (audit.Handler): behind authentication as /approvals
// (the same tokens, answered 401 with their challenge); who may read which decisions is the
// run service's rule (runs.Service.AuditDecisions). No CORS: auditors' tools and the console
// (same origin) read it, not other sites.
func (a *App) auditExport() http.Handler {
	var h http.Handler = audit.New(audit.Options{Service: a.Service, WriteTimeout: a.cfg.WriteTimeout, Logger: a.log})
	if a.authn != nil {
		h = auth.Require(a.authn, h, audit.Unauthorized)
	} else {
		h = auth.Anonymous(h)
	}
	return h
}

// auditVerify is `interlock audit verify FILE`: it checks an export of GET /audit (FILE, or
// stdin for -) and prints OK with what it holds, or returns the first bad line (exit 1).
func auditVerify(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 || (strings.HasPrefix(args[0], "-") && args[0] != "-") {
		return &usageError{err: errors.New("audit verify takes one argument: the export's file, or - for stdin")}
	}
	in, name := stdin, "stdin"
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return fmt.Errorf("audit verify: %w", err)
		}
		defer f.Close()
		in, name = f, args[0]
	}
	sum, err := audit.Verify(in)
	if err != nil {
		return fmt.Errorf("audit verify: %s: %w", name, err)
	}
	format := map[audit.Encoding]string{audit.NDJSON: "NDJSON", audit.CSV: "CSV"}[sum.Encoding]
	fmt.Fprintf(stdout, "OK: %s, %d decisions from %s to %s, last hash %s\n", format, sum.Decisions, sum.From, sum.To, sum.Hash)
	return nil
}
