// Command interlock is the Interlock server: a GraphQL API that runs AI agents and holds their
// risky tool calls for a person. Everything it does is in internal/app; `interlock help` lists
// its commands and flags.
package main

//go:generate go tool gqlgen generate

import (
	"os"

	"interlock/internal/app"
)

// version is set at build time with -ldflags "-X main.version=…" (the Dockerfile's VERSION).
var version = "dev"

func main() { os.Exit(app.Main(version)) }
