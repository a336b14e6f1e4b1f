package graph_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"interlock/internal/proctest"
)

// TestGeneratedCodeIsCurrent regenerates graph/ from schema.graphqls in a copy of the module and
// fails when the committed generated code differs: run `go generate ./...` and commit.
// gqlgen type-checks the module, which compiles the whole tree again, so -short, the README's
// test command, leaves it to a step of its own (.ci/run's "rebuild").
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles the whole tree again to type-check it (.ci/run's step \"rebuild\")")
	}
	dir := t.TempDir()
	const root = ".." // the module: gqlgen.yml, schema.graphqls and the packages it reads
	err := filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		path, err := filepath.Rel(root, full)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "docs") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, path), 0o755)
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".graphqls") && !strings.HasSuffix(path, ".yml") &&
			path != "go.mod" && path != "go.sum" && !strings.HasSuffix(path, ".sql") && !strings.Contains(path, "static") {
			return nil
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, path), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := proctest.Command(t, "go", "tool", "gqlgen", "generate")
	cmd.Dir = dir
	// gqlgen type-checks the module's packages from export data that `go list` compiles. The
	// compiler's cache key holds a package's directory, which is new for every copy, so each run
	// compiled them all again (3 of the test's 4 s); with -trimpath it does not, and the copy of
	// the previous run serves. The generated code does not depend on where the copy is.
	// CGO_ENABLED=0 with -trimpath is the Dockerfile's configuration: deploy's
	// TestDockerBuildCommandMakesAStaticBinary compiles the same packages, once for both.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gqlgen generate: %v\n%s", err, out)
	}
	for _, f := range []string{"graph/generated.go", "graph/model/models_gen.go", "graph/schema.resolvers.go"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, _ := os.ReadFile(filepath.Join(root, f))
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./...` and commit the result", f)
		}
	}
}
