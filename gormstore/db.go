package gormstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/libtnb/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialect names, as gorm.Dialector.Name() reports them.
const (
	DialectSQLite = "sqlite"
	DialectMySQL  = "mysql"
)

// Open connects to the database named by a setting of the form
//
//	sqlite:path/to/file.db
//	mysql://user:password@host:port/dbname[?param=value...]
//
// and checks that it answers. The error says what was wrong with the setting or the connection in
// one line, without the password.
func Open(ctx context.Context, setting string, opts ...Option) (*gorm.DB, error) {
	switch {
	case strings.HasPrefix(setting, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(setting, "sqlite:"))
	case strings.HasPrefix(setting, "mysql://"):
		dsn, err := mysqlDSN(setting)
		if err != nil {
			return nil, err
		}
		return OpenMySQL(ctx, dsn, opts...)
	default:
		return nil, fmt.Errorf("unsupported database %q: use sqlite:FILE or mysql://USER:PASSWORD@HOST:PORT/DBNAME", redact(setting))
	}
}

// OpenSQLite opens (creating if needed) an SQLite file through a pure-Go driver (libtnb/sqlite over
// modernc.org/sqlite: no cgo, so `go run .` and static builds need nothing but Go), in WAL mode
// with a busy timeout and a single connection, so that concurrent writers queue instead of failing
// with SQLITE_BUSY.
//
// Times are written as UTC text, "2006-01-02 15:04:05.999999999-07:00" (`_time_format=sqlite`),
// which sorts like the instants it holds, and read back in UTC (`_timezone=UTC`): the same text
// and the same values as the glebarez/sqlite driver used before, so files written by older
// versions keep sorting and filtering correctly next to new rows.
func OpenSQLite(ctx context.Context, path string) (*gorm.DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: the file name is empty (use sqlite:interlock.db)")
	}
	dsn := path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_time_format=sqlite&_timezone=UTC"
	db, err := gorm.Open(sqlite.Open(dsn), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open sqlite file %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open sqlite file %s: %w", path, err)
	}
	sqlDB.SetMaxOpenConns(1)
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("open sqlite file %s: %w", path, err)
	}
	return db, nil
}

// Option changes how Open connects.
type Option func(*options)

type options struct{ driverLog *slog.Logger }

// DriverLog sends what the MySQL driver logs — a connection that broke mid-statement, a bad
// idle connection it closed — to log as warnings, instead of the driver's own unstructured
// lines on stderr, which a log collector expecting the server's format would garble. It is set
// on this database's connector only (the driver's process-wide default is left alone).
func DriverLog(log *slog.Logger) Option { return func(o *options) { o.driverLog = log } }

// driverLog is the go-sql-driver Logger over slog, throttled (driverlog.go).
type driverLog struct{ log *throttledLog }

func (d driverLog) Print(v ...any) {
	d.log.warn("mysql driver", strings.TrimSpace(fmt.Sprint(v...)))
}

// OpenMySQL connects with a go-sql-driver DSN (user:pass@tcp(host:port)/db?...). It forces
// parseTime and UTC, which the storage code relies on.
func OpenMySQL(ctx context.Context, dsn string, opts ...Option) (*gorm.DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: bad DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Affected rows are matched rows, as on SQLite: a compare-and-set whose SET happens to equal
	// what is stored (a lease renewed within the same millisecond) still proves it matched.
	cfg.ClientFoundRows = true
	// Arguments are put into the statement by the driver (the connection is utf8mb4, for which
	// that is safe), so a statement is one round trip instead of three (prepare, execute, close).
	cfg.InterpolateParams = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	ioTimeouts(cfg, dsn)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if o.driverLog != nil {
		cfg.Logger = driverLog{&throttledLog{log: o.driverLog}}
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: bad DSN: %w", err)
	}
	db, err := gorm.Open(mysql.New(mysql.Config{Conn: sql.OpenDB(connector), DSNConfig: cfg}), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("connect to mysql at %s (database %q): %w", cfg.Addr, cfg.DBName, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("connect to mysql at %s: %w", cfg.Addr, err)
	}
	sqlDB.SetMaxOpenConns(64)
	sqlDB.SetMaxIdleConns(16)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to mysql at %s (database %q): %w", cfg.Addr, cfg.DBName, err)
	}
	return db, nil
}

// Default read and write timeouts of a MySQL connection. Without them a statement on a
// connection that died without a reset (a network partition, a frozen proxy or server) waits
// forever, and with it everything queued behind it: the run service's own deadlines cover lease
// renewals, but not every write. The read timeout is above InnoDB's default lock wait (50s), so
// a statement waiting for a lock gets MySQL's answer, not a cut connection.
const (
	defaultReadTimeout  = 60 * time.Second
	defaultWriteTimeout = 30 * time.Second
)

// ioTimeouts sets the default read and write timeouts unless the DSN names them (readTimeout=0
// keeps the driver's "no timeout", e.g. for a migration that runs longer than a minute).
func ioTimeouts(cfg *gomysql.Config, dsn string) {
	params := url.Values{}
	if i := strings.LastIndex(dsn, "/"); i >= 0 {
		if _, q, ok := strings.Cut(dsn[i:], "?"); ok {
			params, _ = url.ParseQuery(q)
		}
	}
	if !params.Has("readTimeout") {
		cfg.ReadTimeout = defaultReadTimeout
	}
	if !params.Has("writeTimeout") {
		cfg.WriteTimeout = defaultWriteTimeout
	}
}

func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// mysqlDSN turns mysql://user:pass@host:port/dbname?x=y into the driver's DSN.
func mysqlDSN(setting string) (string, error) {
	u, err := url.Parse(setting)
	if err != nil {
		return "", fmt.Errorf("bad mysql URL %q: %v", redact(setting), err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || dbName == "" {
		return "", fmt.Errorf("bad mysql URL %q: want mysql://USER:PASSWORD@HOST:PORT/DBNAME", redact(setting))
	}
	cfg := gomysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	cfg.DBName = dbName
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	for k, v := range u.Query() {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v[0]
	}
	return cfg.FormatDSN(), nil
}

// redact hides the password of a URL-shaped setting so it can be printed.
func redact(setting string) string {
	u, err := url.Parse(setting)
	if err != nil || u.User == nil {
		return setting
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
