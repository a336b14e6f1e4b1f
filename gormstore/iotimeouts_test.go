package gormstore

import (
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// A MySQL connection has read and write timeouts unless the setting names its own (0 included),
// so a statement on a dead connection cannot wait forever.
func TestMySQLConnectionsHaveIOTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn         string
		read, write time.Duration
	}{
		{"u:p@tcp(db:3306)/x", defaultReadTimeout, defaultWriteTimeout},
		{"u:p?x@tcp(db:3306)/x?parseTime=true", defaultReadTimeout, defaultWriteTimeout},
		{"u:p@tcp(db:3306)/x?readTimeout=5s", 5 * time.Second, defaultWriteTimeout},
		{"u:p@tcp(db:3306)/x?readTimeout=0&writeTimeout=0", 0, 0},
	} {
		cfg, err := gomysql.ParseDSN(tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		ioTimeouts(cfg, tc.dsn)
		if cfg.ReadTimeout != tc.read || cfg.WriteTimeout != tc.write {
			t.Errorf("%s: read %s, write %s; want %s, %s", tc.dsn, cfg.ReadTimeout, cfg.WriteTimeout, tc.read, tc.write)
		}
	}
}
