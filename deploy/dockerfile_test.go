package deploy_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"interlock/internal/proctest"
)

// There is no Docker engine where the tests run, so these tests read the Dockerfile and
// .dockerignore and hold them to what the image promises: a static binary, a non-root user, and
// the SQLite default on a declared volume that user owns.

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// dockerStages parses a Dockerfile into its stages, each the instructions from one FROM to the
// next (the FROM included). Comment lines, parser directives among them, are skipped.
func dockerStages(t *testing.T, file string) [][]instruction {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before the first FROM", file, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		flush()
	}
	flush()
	if len(stages) == 0 {
		t.Fatalf("%s has no FROM", file)
	}
	return stages
}

// envOf returns the variables an ENV instruction sets, in either form (K=V ... or K V).
func envOf(args string) map[string]string {
	env := map[string]string{}
	fields := strings.Fields(args)
	if len(fields) > 0 && !strings.Contains(fields[0], "=") {
		env[fields[0]] = strings.Trim(strings.TrimSpace(strings.TrimPrefix(args, fields[0])), `"`)
		return env
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		env[k] = strings.Trim(v, `"`)
	}
	return env
}

// volumesOf returns the paths of a VOLUME instruction, in either form (JSON array or words).
func volumesOf(t *testing.T, args string) []string {
	if strings.HasPrefix(args, "[") {
		var v []string
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatalf("VOLUME %s: %v", args, err)
		}
		return v
	}
	return strings.Fields(args)
}

// flagOf returns the value of --name=value among an instruction's leading flags.
func flagOf(args, name string) string {
	for _, f := range strings.Fields(args) {
		if !strings.HasPrefix(f, "--") {
			break
		}
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// withoutFlags drops an instruction's leading --flags.
func withoutFlags(args string) []string {
	fields := strings.Fields(args)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		fields = fields[1:]
	}
	return fields
}

func TestDockerImageRunsAsNonRootWithSQLiteOnAVolume(t *testing.T) {
	stages := dockerStages(t, "Dockerfile")
	final := stages[len(stages)-1]

	var user string
	env := map[string]string{}
	var volumes []string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENV":
			for k, v := range envOf(in.args) {
				env[k] = v
			}
		case "VOLUME":
			volumes = append(volumes, volumesOf(t, in.args)...)
		}
	}

	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the final stage runs as %q; want a non-root USER", user)
	}
	if !slices.Contains(volumes, "/data") {
		t.Errorf("the final stage declares volumes %v; want VOLUME /data", volumes)
	}
	const wantDB = "sqlite:/data/interlock.db"
	if env["INTERLOCK_DB"] != wantDB {
		t.Errorf("ENV INTERLOCK_DB is %q; want %q", env["INTERLOCK_DB"], wantDB)
	}

	// /data must belong to that user, or SQLite cannot create the file, its WAL and its -shm there.
	owned := false
	for _, in := range final {
		if in.cmd != "COPY" {
			continue
		}
		words := withoutFlags(in.args)
		if len(words) >= 2 && path.Clean(words[len(words)-1]) == "/data" {
			owned = flagOf(in.args, "chown") == user
			if !owned {
				t.Errorf("COPY %s creates /data owned by %q; want --chown=%s, the USER", in.args, flagOf(in.args, "chown"), user)
			}
		}
	}
	if !owned {
		t.Errorf("no COPY --chown=%s ... /data in the final stage: the volume would be root's", user)
	}
}

// dockerBuildCommand returns the `go build` command of the Dockerfile's build stage as words,
// starting with its CGO_ENABLED=0 assignment.
func dockerBuildCommand(t *testing.T) []string {
	t.Helper()
	for _, stage := range dockerStages(t, "Dockerfile") {
		for _, in := range stage {
			if in.cmd != "RUN" {
				continue
			}
			for _, part := range strings.Split(strings.Join(withoutFlags(in.args), " "), "&&") {
				words := shellWords(part)
				if i := slices.Index(words, "go"); i >= 0 && i+1 < len(words) && words[i+1] == "build" {
					if !slices.Contains(words[:i], "CGO_ENABLED=0") {
						t.Fatalf("the Dockerfile builds with %q: want CGO_ENABLED=0 for a static binary", part)
					}
					return words
				}
			}
		}
	}
	t.Fatal("the Dockerfile runs no go build")
	return nil
}

// shellWords splits a shell command into words as sh would for the simple commands of a
// Dockerfile: on blanks, with '…' and "…" quoting (no escapes or expansions).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// testVersion is the VERSION build argument the tests build with.
const testVersion = "9.8.7-test"

// TestDockerBuildCommandMakesAStaticBinary runs the Dockerfile's own build command here (with
// VERSION=9.8.7-test) and checks that the binary needs no dynamic loader or shared library, as
// a distroless static base requires, and that `interlock version` prints the build argument.
// The command compiles the whole tree again (CGO_ENABLED=0 -trimpath is a build configuration of
// its own), so -short, the README's test command, leaves it to a step of its own (.ci/run's
// "rebuild"). graph's TestGeneratedCodeIsCurrent builds in the same configuration and shares
// the compiled packages.
func TestDockerBuildCommandMakesAStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles the whole tree again as the Dockerfile does (.ci/run's step \"rebuild\")")
	}
	words := dockerBuildCommand(t)
	out := filepath.Join(t.TempDir(), "interlock")
	var env []string
	var args []string
	for i := 0; i < len(words); i++ {
		w := strings.ReplaceAll(words[i], "${VERSION}", testVersion)
		switch {
		case len(args) == 0 && strings.Contains(w, "=") && w != "go":
			env = append(env, w)
		case w == "-o" && i+1 < len(words):
			args = append(args, "-o", out)
			i++
		default:
			args = append(args, w)
		}
	}
	cmd := proctest.Command(t, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(words, " "), err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary links shared libraries %v (%v)", libs, err)
	}
	v, err := proctest.Command(t, out, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "interlock "+testVersion+" (go") {
		t.Errorf("interlock version = %q, %v; want the VERSION build argument %s", v, err, testVersion)
	}
}

// TestDockerImageChecksItsHealthAndKnowsItsVersion: the build stage takes a VERSION argument
// and links it into main.version; the final stage has a HEALTHCHECK that runs the image's own
// binary (distroless has no shell or curl) with the healthcheck command, in exec form.
func TestDockerImageChecksItsHealthAndKnowsItsVersion(t *testing.T) {
	stages := dockerStages(t, "Dockerfile")
	var buildArgs []string
	for _, in := range stages[0] {
		if in.cmd == "ARG" {
			name, _, _ := strings.Cut(in.args, "=")
			buildArgs = append(buildArgs, name)
		}
	}
	if !slices.Contains(buildArgs, "VERSION") {
		t.Errorf("the build stage declares ARG %v; want ARG VERSION", buildArgs)
	}
	words := dockerBuildCommand(t)
	i := slices.Index(words, "-ldflags")
	if i < 0 || i+1 >= len(words) || !strings.Contains(" "+words[i+1]+" ", " -X main.version=${VERSION} ") {
		t.Errorf("the build command %q does not set -ldflags \"-X main.version=${VERSION}\"", strings.Join(words, " "))
	}
	// A release binary: no build machine paths, no symbol table or DWARF (69 MB, not 98 MB).
	if !slices.Contains(words, "-trimpath") {
		t.Errorf("the build command %q lacks -trimpath", strings.Join(words, " "))
	}
	if i < 0 || i+1 >= len(words) || !strings.Contains(" "+words[i+1]+" ", " -s ") || !strings.Contains(" "+words[i+1]+" ", " -w ") {
		t.Errorf("the build command %q does not strip the binary (-ldflags \"-s -w\")", strings.Join(words, " "))
	}

	final := stages[len(stages)-1]
	var entrypoint, check []string
	for _, in := range final {
		switch in.cmd {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec form: %v", in.args, err)
			}
		case "HEALTHCHECK":
			rest := withoutFlags(in.args)
			if len(rest) < 2 || rest[0] != "CMD" {
				t.Fatalf("HEALTHCHECK %s: want CMD [...]", in.args)
			}
			if err := json.Unmarshal([]byte(strings.Join(rest[1:], " ")), &check); err != nil {
				t.Fatalf("HEALTHCHECK %s: want the exec form (there is no shell): %v", in.args, err)
			}
			for _, opt := range []string{"interval", "timeout", "retries"} {
				if flagOf(in.args, opt) == "" {
					t.Errorf("HEALTHCHECK sets no --%s", opt)
				}
			}
		}
	}
	if len(entrypoint) == 0 || !slices.Equal(check, []string{entrypoint[0], "healthcheck"}) {
		t.Errorf("HEALTHCHECK CMD %q; want [%q \"healthcheck\"], the ENTRYPOINT's binary", check, entrypoint)
	}
}

// dockerIgnored reports whether a .dockerignore pattern list keeps the slash-separated path out
// of the build context: a pattern matches the path or one of its parent directories, and a
// leading **/ matches at any depth.
func dockerIgnored(patterns []string, p string) bool {
	parts := strings.Split(p, "/")
	for i := 1; i <= len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		for _, pat := range patterns {
			if ignoreMatch(pat, prefix) {
				return true
			}
		}
	}
	return false
}

func ignoreMatch(pat, p string) bool {
	if rest, ok := strings.CutPrefix(pat, "**/"); ok {
		parts := strings.Split(p, "/")
		for i := range parts {
			if ignoreMatch(rest, strings.Join(parts[i:], "/")) {
				return true
			}
		}
		return false
	}
	ok, _ := path.Match(pat, p)
	return ok
}

func dockerIgnorePatterns(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not understood by this test", line)
		}
		patterns = append(patterns, strings.Trim(path.Clean(line), "/"))
	}
	return patterns
}

// TestDockerIgnoreKeepsTheContextSmallButComplete checks that the build context leaves out what
// must not be in it (history, databases, node_modules, test output) and keeps every file the
// build compiles or embeds.
func TestDockerIgnoreKeepsTheContextSmallButComplete(t *testing.T) {
	patterns := dockerIgnorePatterns(t)
	for _, p := range []string{
		".git", "interlock.db", "data/interlock.db-wal", "gormstore/testdata/old.db",
		"node_modules", "web/node_modules/x/index.js", "runs/runs.test", "cover.out", "tmp/x",
		".env", "deploy/nginx.conf",
	} {
		if !dockerIgnored(patterns, p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}

	out, err := proctest.Command(t, "go", "list", "-json=ImportPath,Dir,GoFiles,EmbedFiles", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var pkg struct {
			Dir                 string
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(pkg.GoFiles, pkg.EmbedFiles...) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	for _, p := range needed {
		if dockerIgnored(patterns, p) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", p)
		}
	}
}
