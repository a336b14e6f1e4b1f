package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"interlock/internal/apptest"
)

// TestWebhookRedirectIsNotFollowed: a webhook URL that answers with a redirect (each of the five
// statuses) is a failed delivery; the host it points at receives nothing — neither the event's
// body nor its signature — and the delivery's last error says why.
func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			elsewhere := newReceiver(t)
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+"/stolen", status)
			}))
			t.Cleanup(redirector.Close)
			file := notifyConfig(t, redirector.URL, "  maxAttempts: 2\n", "")
			s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "redirect.db"), "--config", file)
			run := s.StartRun(t, "refund order 6 for 5", nil)
			waitSuspended(t, s.URL, run.RunID)
			_, list := deliveryGivenUp(t, s, run.RunID)
			if want := fmt.Sprintf("receiver answered HTTP %d, a redirect", status); !strings.HasPrefix(list[0].LastError, want) {
				t.Errorf("last error %q; want it to start %q", list[0].LastError, want)
			}
			if got := elsewhere.got(); len(got) != 0 {
				t.Errorf("the redirect's target received %d requests (first: %s)", len(got), got[0].body)
			}
		})
	}
}
