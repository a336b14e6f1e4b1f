package app_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// BenchmarkHookRepeated sends one coding agent's identical hook again and again through the whole
// server, each answered at once (wait=0: its request ends, and the next is a new request under the
// same key), on SQLite and — with INTERLOCK_TEST_MYSQL_DSN — MariaDB/MySQL. A request's cost must
// not grow with the requests made before it under its key: "last/first" is the median time of the
// last tenth of the iterations over that of the first tenth (about 1 when it is constant).
//
//	go test ./internal/app -run '^$' -bench HookRepeated -benchtime 150x
func BenchmarkHookRepeated(b *testing.B) {
	b.Setenv("INTERLOCK_TEST_HOOK_JWT", hookJWTSecret)
	for _, db := range []string{"sqlite", "mysql"} {
		b.Run(db, func(b *testing.B) {
			url := "sqlite:" + filepath.Join(b.TempDir(), "interlock.db")
			if db == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(b))
			}
			s := apptest.Start(b, url, "--auth=on", "--mutation-rate", "0", "--config", apptest.WriteConfig(b, hooksConfig(b)))
			body := apptest.HookFixture(b, "codex/permission-request.json")
			client := &http.Client{}
			var took []time.Duration
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/hooks/codex/many?wait=0", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("cc"))
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("hook answered %d", resp.StatusCode)
				}
				took = append(took, time.Since(start))
			}
			if tenth := len(took) / 10; tenth > 0 {
				b.ReportMetric(float64(median(took[len(took)-tenth:]))/float64(median(took[:tenth])), "last/first")
			}
		})
	}
}
