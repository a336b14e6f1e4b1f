package app

import (
	"flag"

	"interlock/tracing"
)

// What the package's external tests (package app_test) need of its insides: kept here, in a
// test file, so the application's API stays what main.go and the tools use.

// FlagDoc is one flag as `interlock help` and docs/configuration.md show it.
type FlagDoc struct{ Name, Usage, Default, Env string }

// FlagDocs lists every flag of the settings table.
func FlagDocs() []FlagDoc {
	s, _ := defineFlags(func(string) string { return "" })
	var docs []FlagDoc
	s.fs.VisitAll(func(f *flag.Flag) {
		docs = append(docs, FlagDoc{Name: f.Name, Usage: f.Usage, Default: f.DefValue, Env: s.env[f.Name]})
	})
	return docs
}

// MaxBodyBytes is the largest request body the API reads.
const MaxBodyBytes = maxBodyBytes

var (
	RunCommand = runCommand
	ParseRate  = parseRate
)

// Version is the version the binary reports.
func Version() string { return version }

// Tracing is the app's span exporter (nil: tracing is off).
func (a *App) Tracing() *tracing.Tracing { return a.tracing }
