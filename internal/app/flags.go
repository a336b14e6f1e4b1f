package app

import (
	"flag"
	"fmt"
	"io"
)

// ParseConfig reads the server's settings from the command line's flags, each defaulting to
// its environment variable (read with getenv) and then to its built-in default. A word that is
// not a flag, among or after them, is an error: it is a mistyped command or a flag missing
// its dashes, and ignoring it would start a server the person did not ask for.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	s, finish := defineFlags(getenv)
	if err := s.fs.Parse(args); err != nil {
		return Config{}, &usageError{err: err, showUsage: true}
	}
	if s.fs.NArg() > 0 {
		return Config{}, strayWord(s.fs.Arg(0))
	}
	return finish()
}

// flagSet is the command line's flags, each with the environment variable that sets it when
// the flag is not given. The help text and docs/configuration.md's test read them from here.
type flagSet struct {
	fs *flag.FlagSet
	// env maps each flag's name to its environment variable.
	env map[string]string
}

// defineFlags defines a flag for each setting (settings.go) on a new FlagSet, with defaults read
// through getenv (a func returning "" gives the built-in ones). Once the FlagSet has parsed the
// command line, finish checks the values and returns the Config, or an error naming the flag
// and its variable.
func defineFlags(getenv func(string) string) (s *flagSet, finish func() (Config, error)) {
	s = &flagSet{fs: flag.NewFlagSet("interlock", flag.ContinueOnError), env: map[string]string{}}
	s.fs.SetOutput(io.Discard)
	values := make([]*string, len(settings))
	for i, st := range settings {
		def := st.def
		if v := getenv(st.env()); v != "" {
			def = v
		}
		s.env[st.name] = st.env()
		values[i] = s.fs.String(st.name, def, st.usage)
	}
	return s, func() (Config, error) {
		var cfg Config
		for i, st := range settings {
			if err := st.set(&cfg, *values[i]); err != nil {
				return Config{}, fmt.Errorf("--%s / %s: %w", st.name, st.env(), err)
			}
		}
		return cfg, nil
	}
}
