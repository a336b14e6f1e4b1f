package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"interlock/outage"
)

// Options are what a Dispatcher needs besides its config; zero fields take defaults.
type Options struct {
	// Getenv reads webhook URLs and secrets (default os.Getenv via the caller).
	Getenv func(string) string
	// Logger gets one line per given-up delivery and per failed attempt (default slog.Default).
	Logger *slog.Logger
	// Client posts the events (default a client with the config's timeout).
	Client *http.Client
	// Owner names this instance in the outbox leases (default random).
	Owner string
	// Now is the clock of signatures (default time.Now).
	Now func() time.Time
	// Deliverers deliver the webhooks whose format is not POSTed by the dispatcher
	// (slack-app), by webhook name.
	Deliverers map[string]Deliverer
}

// Deliverer delivers events to a webhook in a way of its own (package slackapp): an error is a
// failed attempt, retried as a POST's would be.
type Deliverer interface {
	Deliver(ctx context.Context, e Event) error
}

// Dispatcher delivers the outbox's events: it claims due deliveries with a lease, POSTs each,
// and records the outcome. Each instance runs one; leases keep two from sending one row at once.
type Dispatcher struct {
	store     Store
	cfg       Config
	receivers map[string]receiver
	client    *http.Client
	log       *slog.Logger
	owner     string
	now       func() time.Time
	slots     chan struct{} // one per attempt in flight
	inFlight  sync.WaitGroup
	claims    *outage.Log // failures to claim, logged as changes of state
	delivers  map[string]Deliverer
}

// workers is how many deliveries one instance POSTs at once. A receiver that hangs holds a
// worker for at most the timeout; the others go on claiming.
const workers = 8

// NewDispatcher checks the webhooks' environment variables and returns a dispatcher over store.
// cfg is taken WithDefaults. The dispatcher delivers rows; what writes them is the run store,
// built for cfg.Targets() (see Store).
func NewDispatcher(store Store, cfg Config, o Options) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	recv, err := cfg.receivers(o.Getenv)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Webhooks {
		if _, ok := o.Deliverers[w.Name]; w.Format == FormatSlackApp && !ok {
			return nil, fmt.Errorf("notifications: webhook %s (slack-app) has no deliverer", w.Name)
		}
	}
	d := &Dispatcher{store: store, cfg: cfg, receivers: recv, client: o.Client, log: o.Logger, owner: o.Owner, now: o.Now, slots: make(chan struct{}, workers), delivers: o.Deliverers}
	if d.client == nil {
		d.client = &http.Client{Timeout: cfg.Timeout}
	}
	d.client = refuseRedirects(d.client)
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.owner == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		d.owner = "notify-" + hex.EncodeToString(b)
	}
	if d.now == nil {
		d.now = time.Now
	}
	d.claims = &outage.Log{Logger: d.log, Name: "notifications: claim deliveries"}
	return d, nil
}

// lease is how long a claim holds a row: its POST ends within the timeout.
func (d *Dispatcher) lease() time.Duration { return 2*d.cfg.Timeout + 30*time.Second }

// Run delivers until ctx ends, claiming due rows for its free workers every poll interval (at
// once again while claims fill them), then waits for the attempts in flight.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.inFlight.Wait()
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	var lastPurge time.Time
	for {
		full := d.Once(ctx)
		if time.Since(lastPurge) > time.Hour {
			lastPurge = time.Now()
			if _, err := d.store.PurgeDeliveries(ctx, time.Now().Add(-d.cfg.Retention), 1000); err != nil && ctx.Err() == nil {
				d.log.Warn("notifications: purge delivered", "err", err)
			}
		}
		if full && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Once claims as many due deliveries as there are free workers and starts an attempt of each;
// it reports whether it claimed all it asked for (more may be due).
func (d *Dispatcher) Once(ctx context.Context) bool {
	free := cap(d.slots) - len(d.slots)
	if free == 0 {
		return false
	}
	list, err := d.store.ClaimDeliveries(ctx, d.owner, d.lease(), free)
	if err != nil {
		if ctx.Err() == nil {
			d.claims.Fail(err) // once, and a summary now and then, while storage is down
		}
		return false
	}
	d.claims.OK()
	for _, dl := range list {
		d.slots <- struct{}{}
		d.inFlight.Add(1)
		go func() {
			defer d.inFlight.Done()
			defer func() { <-d.slots }()
			d.attempt(ctx, dl)
		}()
	}
	return len(list) == free
}

// attempt POSTs one claimed delivery and records the outcome.
func (d *Dispatcher) attempt(ctx context.Context, dl Delivery) {
	attempt := dl.Attempts + 1
	var o Outcome
	r, ok := d.receivers[dl.Target]
	if !ok {
		o.Error = fmt.Sprintf("webhook %q is no longer in the config", dl.Target)
	} else if err := d.post(ctx, r, dl); err == nil {
		o.Delivered = true
	} else {
		o.Error = err.Error()
		switch {
		case ctx.Err() != nil:
			// Shutting down: the row is due again at once, for this or another instance.
			o.Error, o.RetryAfter = "interrupted: the instance was stopping", time.Millisecond
		case attempt < d.cfg.MaxAttempts:
			o.RetryAfter = d.backoff(attempt)
		}
	}
	held, err := d.store.CompleteDelivery(context.WithoutCancel(ctx), dl.ID, d.owner, o)
	log := d.log.With("event", dl.EventID, "webhook", dl.Target, "run", dl.RunID, "kind", dl.Kind, "attempt", attempt)
	switch {
	case err != nil:
		log.Error("notifications: record delivery", "err", err)
	case !held:
		log.Warn("notifications: lease lost before the outcome was recorded; the event may be sent again")
	case o.Delivered:
		log.Debug("notification delivered")
	case o.RetryAfter > 0:
		log.Warn("notification failed; will retry", "err", o.Error, "retryIn", o.RetryAfter.Round(time.Millisecond))
	default:
		log.Error("notification given up", "err", o.Error, "attempts", attempt)
	}
}

// backoff is the wait before attempt+1: retryBackoff doubled per attempt up to maxBackoff, with
// jitter (a random point in its upper half), so that many failed rows do not retry in step.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	b := d.cfg.RetryBackoff
	for i := 1; i < attempt && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.cfg.MaxBackoff)
	return b/2 + mrand.N(b/2+1)
}

// post sends one delivery in r's format. Errors never hold the URL (it may be a secret).
func (d *Dispatcher) post(ctx context.Context, r receiver, dl Delivery) error {
	var e Event
	if err := json.Unmarshal(dl.Payload, &e); err != nil {
		return fmt.Errorf("decode stored event: %w", err)
	}
	e.URL = RunURL(d.cfg.ConsoleURL, e.Run.ID)
	e = e.withHidden()
	if r.Format == FormatSlackApp {
		return d.delivers[r.Name].Deliver(ctx, e)
	}
	var body []byte
	var err error
	if r.Format == FormatSlack {
		body, err = slackBody(e)
	} else {
		body, err = json.Marshal(e)
	}
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad webhook URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Interlock-Webhook/1")
	req.Header.Set(EventIDHeader, dl.EventID)
	if r.secret != nil {
		req.Header.Set(SignatureHeader, Sign(r.secret, d.now(), body))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 && resp.Header.Get("Location") != "" {
		return fmt.Errorf("receiver answered HTTP %d, a redirect, which is not followed: a webhook's body and signature go only to its configured URL", resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// Start runs a dispatcher over store for cfg in the background, until the returned stop is
// called; stop waits for the attempts in flight. An error names what in the environment is
// missing.
func Start(store Store, cfg Config, o Options) (stop func(), err error) {
	d, err := NewDispatcher(store, cfg, o)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(d.cfg.Webhooks))
	for i, w := range d.cfg.Webhooks {
		names[i] = w.Name + " (" + w.Format + ")"
	}
	d.log.Info("notifications on", "webhooks", names, "owner", d.owner)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// refuseRedirects is a copy of client that follows no redirect: a webhook's body (who asked,
// the tool, its arguments) and its signature are meant for the URL the configuration names, and
// net/http would re-send a 307's or 308's body to any host it points at. A redirect is answered
// as the receiver's answer — a failed attempt, retried and then given up like any other.
func refuseRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}
