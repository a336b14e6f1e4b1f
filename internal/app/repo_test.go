package app

import "path/filepath"

// repoRoot is the module's root, where the examples, docs and web assets live; tests run in
// this package's directory.
const repoRoot = "../.."

// repoPath is a path under the module's root.
func repoPath(elem ...string) string { return filepath.Join(append([]string{repoRoot}, elem...)...) }
