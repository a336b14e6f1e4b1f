package runs

import (
	"strings"
	"unicode/utf8"

	"interlock/runtype"
)

// Search: suspendedRuns(search:) and recentRuns(search:) keep the runs that match what a person
// typed, in any of the places they remember a run by. A run matches when, case folded (ASCII
// letters only on SQLite, whose LOWER folds no other), the text is
//
//   - a prefix of its id (a run id copied whole, or its first characters);
//   - within the name or the stored arguments (the JSON text, as the agent sent it) of one of
//     its tool calls, waiting or decided;
//   - within its thread id, its resource id, or its startedBy (the requester).
//
// The text is matched as it is: %, _ and the LIKE escape character match themselves. Search
// narrows a listing; it never widens it: the principal's scope (its resources) and every other
// filter still apply, so a search finds only runs the listing would show.
//
// Cost: the id, thread, resource and requester tests are LIKE on the run's row, and the tool
// tests an EXISTS over the run's call rows (by run id, an index); neither can use an index for
// a substring, so a search reads every run the other filters leave. docs/performance.md has
// the figures for 100,000 runs.

// maxSearch bounds the search text (in characters).
const maxSearch = 200

// searchText returns the search to apply (trimmed), or BAD_USER_INPUT for one too long.
func searchText(q string) (string, error) {
	q = strings.TrimSpace(q)
	if utf8.RuneCountInString(q) > maxSearch {
		return "", runtype.Errorf(runtype.CodeBadUserInput, "search is at most %d characters", maxSearch)
	}
	return q, nil
}
