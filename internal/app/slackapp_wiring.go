package app

import (
	"fmt"
	"os"

	"interlock/gormstore"
	"interlock/notify"
	"interlock/slackapp"
)

// slackApp builds the slack-app webhook of the notifications section, if it has one (Problems
// allows one): the dispatcher's deliverer of its events, and the handler of
// POST /slack/interactions, which decides through the run service (set once it is built).
func (a *App) slackApp(n notify.Config, store *gormstore.Store) (map[string]notify.Deliverer, error) {
	for _, w := range n.WithDefaults().Webhooks {
		if w.Format != notify.FormatSlackApp {
			continue
		}
		app, err := slackapp.New(w, store, slackapp.Options{Getenv: os.Getenv, Logger: a.log, PrincipalOf: a.principalOf()})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.cfg.ConfigFile, err)
		}
		a.slack = app
		return map[string]notify.Deliverer{w.Name: app}, nil
	}
	return nil, nil
}

// WaitSlack waits for the Slack presses acknowledged so far to be decided and answered (tests).
func (a *App) WaitSlack() {
	if a.slack != nil {
		a.slack.Wait()
	}
}
