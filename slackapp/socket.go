package slackapp

import (
	"context"
	"net/http"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// socketRetry is the wait before Socket Mode connects again after its connection failed.
const socketRetry = 5 * time.Second

// Start takes presses over Socket Mode when the webhook has an app token (appTokenEnv): Slack
// then sends them over a WebSocket the app opens (apps.connections.open with the app token),
// and no public interactivity URL is needed. Without an app token it does nothing (presses
// come to POST /slack/interactions). Close stops it.
func (a *App) Start() {
	if a.appToken == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	sm := socketmode.New(a.api)
	a.loops.Add(2)
	go func() {
		defer a.loops.Done()
		for {
			err := sm.RunContext(ctx)
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("slack-app: Socket Mode connection failed; connecting again", "err", err, "in", socketRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(socketRetry):
			}
		}
	}()
	go func() {
		defer a.loops.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case evt := <-sm.Events:
				a.socketEvent(ctx, sm, evt)
			}
		}
	}()
}

// socketEvent acknowledges an interaction at once (Slack waits 3 s for the envelope's ack) and
// handles it as ServeHTTP does a verified one: the workspace and channel are checked, and the
// decision follows asynchronously. The connection itself is authenticated (the app token).
func (a *App) socketEvent(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) {
	if evt.Type != socketmode.EventTypeInteractive || evt.Request == nil {
		return
	}
	if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
		a.log.Warn("slack-app: Socket Mode ack", "err", err)
	}
	cb, ok := evt.Data.(slack.InteractionCallback)
	if !ok {
		return
	}
	defer func() { // the event loop is the whole Socket Mode connection: a defect must not end it
		if r := recover(); r != nil {
			a.log.Error("slack-app: Socket Mode interaction panicked", "panic", r)
		}
	}()
	if status, why := a.handle(cb); status != http.StatusOK {
		a.log.Warn("slack-app: refused a Socket Mode interaction", "why", why)
	}
}

// Close stops Socket Mode and waits for the presses acknowledged so far to be decided.
func (a *App) Close() {
	if a.stop != nil {
		a.stop()
	}
	a.loops.Wait()
	a.pending.Wait()
}
