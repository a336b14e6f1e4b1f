//go:build race

package apptest

// raceEnabled: the tests are built with -race.
const raceEnabled = true
