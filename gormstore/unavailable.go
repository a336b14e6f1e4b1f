package gormstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"interlock/runtype"
)

// Storage errors that retrying may cure are wrapped with runtype.ErrUnavailable here, where the
// drivers are known, so that the run service and the API tell "the database is down" (UNAVAILABLE,
// retry) from "no such run" and from a bug (INTERNAL) without knowing any driver.

// unavailableCallback names the GORM callback that classifies the error of every statement.
const unavailableCallback = "interlock:unavailable"

// classifyErrors makes every statement GORM runs on db (queries, creates, updates, deletes, raw
// SQL, inside transactions or not) end with its error classified. It is registered once per
// database, last in each chain, so it sees the error whichever callback set it.
func classifyErrors(db *gorm.DB) {
	cb := db.Callback()
	for _, p := range []interface {
		Get(string) func(*gorm.DB)
		Register(string, func(*gorm.DB)) error
	}{cb.Create(), cb.Query(), cb.Update(), cb.Delete(), cb.Row(), cb.Raw()} {
		if p.Get(unavailableCallback) != nil {
			continue
		}
		_ = p.Register(unavailableCallback, func(db *gorm.DB) {
			if db.Error != nil && unavailable(db.Error) {
				db.Error = runtype.Unavailable(db.Error)
			}
		})
	}
}

// classify wraps err with runtype.ErrUnavailable when it says storage could not be reached; for
// errors that did not pass through a statement's callbacks (begin, commit, reading rows).
func classify(err error) error {
	if err != nil && unavailable(err) {
		return runtype.Unavailable(err)
	}
	return err
}

// unavailable reports whether err says the database could not be reached or could not answer in
// time — a failure that retrying may cure — rather than a fault of the statement or the data.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up: nothing to say about the database
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error // dial failures, timeouts, closed connections
	if errors.As(err, &ne) {
		return true
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // too many connections
			1053,                   // server shutdown in progress
			1205,                   // lock wait timeout: storage could not answer in time (a write retries it first)
			1290,                   // running with --read-only (a failover in progress)
			1836,                   // read-only mode
			1927,                   // connection was killed (MariaDB)
			2002, 2003, 2006, 2013: // cannot connect, server gone away, lost connection
			return true
		}
		return false
	}
	var se interface{ Code() int } // modernc.org/sqlite's *Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code of an extended one
		case 5, // SQLITE_BUSY: locked by another process beyond the busy timeout
			6,  // SQLITE_LOCKED
			10, // SQLITE_IOERR
			14: // SQLITE_CANTOPEN
			return true
		}
		return false
	}
	// database/sql's own, unexported: the pool was closed under the statement (the store is
	// shutting down), which another instance, or this one restarted, will answer.
	return strings.Contains(err.Error(), "sql: database is closed")
}
