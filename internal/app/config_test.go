package app_test

import (
	"strings"
	"testing"
	"time"

	"interlock/internal/app"
)

// TestTransportSettings: the transport limits have their documented defaults, are set by flag
// or environment, and a non-positive or malformed value is refused naming the setting.
func TestTransportSettings(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	cfg, err := app.ParseConfig(nil, none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxQueryTokens != 10000 || cfg.MaxSubscriptionsPerConnection != 100 || cfg.WSInitTimeout != 10*time.Second ||
		cfg.ReadTimeout != 30*time.Second || cfg.WriteTimeout != 60*time.Second || cfg.IdleTimeout != 120*time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}
	env := map[string]string{"INTERLOCK_MAX_QUERY_TOKENS": "500", "INTERLOCK_IDLE_TIMEOUT": "5s"}
	cfg, err = app.ParseConfig([]string{"--max-subscriptions-per-connection", "7", "--ws-init-timeout", "2s"}, func(k string) string { return env[k] })
	if err != nil || cfg.MaxQueryTokens != 500 || cfg.IdleTimeout != 5*time.Second || cfg.MaxSubscriptionsPerConnection != 7 || cfg.WSInitTimeout != 2*time.Second {
		t.Fatalf("set: %+v, %v", cfg, err)
	}
	for _, tc := range []struct{ flag, env string }{
		{"--max-query-tokens", "INTERLOCK_MAX_QUERY_TOKENS"},
		{"--max-subscriptions-per-connection", "INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION"},
		{"--ws-init-timeout", "INTERLOCK_WS_INIT_TIMEOUT"},
		{"--read-timeout", "INTERLOCK_READ_TIMEOUT"},
		{"--write-timeout", "INTERLOCK_WRITE_TIMEOUT"},
		{"--idle-timeout", "INTERLOCK_IDLE_TIMEOUT"},
	} {
		for _, bad := range []string{"0", "-1", "-1s", "soon"} {
			_, err := app.ParseConfig([]string{tc.flag, bad}, none)
			if err == nil || !strings.Contains(err.Error(), tc.env) {
				t.Errorf("%s %s: %v, want an error naming %s", tc.flag, bad, err, tc.env)
			}
			_, err = app.ParseConfig(nil, func(k string) string { return map[string]string{tc.env: bad}[k] })
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%s=%s: %v, want an error naming %s", tc.env, bad, err, tc.flag)
			}
		}
	}
}
