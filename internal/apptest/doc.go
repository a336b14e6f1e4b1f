// Package apptest runs the real application for tests in other packages: a server over a fresh
// SQLite file or MySQL database on 127.0.0.1 (Start, EachDB), a client for its API over HTTP,
// SSE and both WebSocket protocols, and fixtures (fake model servers speaking the chat
// completions wire format, HTTP tools that count their calls, config files). The API's tests
// (internal/app) and the console's browser tests (web) share it.
package apptest

import "os"

// ModelKeyEnv is the variable the test configs name as their model's apiKeyEnv. It is set for
// the whole test process (the fake models take any key) because tests that run in parallel may
// not change the environment.
const ModelKeyEnv = "INTERLOCK_TEST_MODEL_KEY"

func init() { os.Setenv(ModelKeyEnv, "sk-test") }
