package apptest

import (
	"path/filepath"
	"runtime"
)

// RepoRoot is the module's root, where the examples, docs and web assets live, found from this
// file's place in it so that tests in any package can name them.
var RepoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// RepoPath is a path under the module's root.
func RepoPath(elem ...string) string { return filepath.Join(append([]string{RepoRoot}, elem...)...) }
