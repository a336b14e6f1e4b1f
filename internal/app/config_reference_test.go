package app_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"interlock/config"
	"interlock/internal/app"
)

// docs/configuration.md is the reference of every flag, environment variable and config-file
// key. These tests keep it in step with the code both ways: each flag parseConfig defines and
// each key the config file's structs accept (read by reflection over their yaml tags) must have
// a row, with the flag's variable and default; each row must name something that exists. A
// failure says exactly which row to add or remove.

var configDoc = filepath.Join("..", "..", "docs", "configuration.md") // tests run in this directory

// docTable returns the rows of the tables in the section of configDoc under heading, each as
// its cells (trimmed, backticks kept), header and separator rows left out.
func docTable(t *testing.T, heading string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == heading
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		var cells []string
		// A pipe inside a cell is written \|.
		line = strings.ReplaceAll(strings.TrimSpace(line), `\|`, "\x00")
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|"))
		}
		if strings.Trim(cells[0], "-: ") == "" || !strings.HasPrefix(cells[0], "`") {
			continue // the separator, or the header
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table under %q", configDoc, heading)
	}
	return rows
}

// unquote drops the backticks around a cell: "`--addr`" is "--addr".
func unquote(cell string) string { return strings.Trim(cell, "`") }

const flagsHeading = "## Flags and environment variables"

// TestConfigReferenceHasEveryFlag: each flag has a row naming it, its variable and its built-in
// default (an empty default is written "(none…)" or similar in parentheses), and each row
// names a flag that exists.
func TestConfigReferenceHasEveryFlag(t *testing.T) {
	t.Parallel()
	rows := map[string][]string{}
	for _, r := range docTable(t, flagsHeading) {
		if len(r) < 4 {
			t.Errorf("%s: row %q needs four cells: flag, variable, default, meaning", configDoc, r)
			continue
		}
		rows[unquote(r[0])] = r
	}
	for _, f := range app.FlagDocs() {
		name, env := "--"+f.Name, f.Env
		def := "`" + f.Default + "`"
		if f.Default == "" {
			def = "(none)"
		}
		r, ok := rows[name]
		delete(rows, name)
		switch {
		case env == "":
			t.Errorf("flag %s has no environment variable: add it to the settings table (settings.go)", name)
		case !ok:
			t.Errorf("%s lacks the flag %s: add this row to the table under %q:\n| `%s` | `%s` | %s | %s |", configDoc, name, flagsHeading, name, env, def, f.Usage)
		case unquote(r[1]) != env:
			t.Errorf("%s: %s is set by %s, not %s: fix its row", configDoc, name, env, r[1])
		case f.Default == "" && !strings.HasPrefix(r[2], "("):
			t.Errorf("%s: %s has no default, not %s: write it as (none) or (what happens without it)", configDoc, name, r[2])
		case f.Default != "" && r[2] != def:
			t.Errorf("%s: %s defaults to %s, not %s: fix its row", configDoc, name, def, r[2])
		}
	}
	for name := range rows {
		t.Errorf("%s documents %s, which is not a flag: remove its row from the table under %q", configDoc, name, flagsHeading)
	}
}

const fileHeading = "## Config file"

// configKey is one key of the config file, as a path (agents[].model.baseURL), with a word for
// what it holds.
type configKey struct{ path, kind string }

// configKeys lists the keys a YAML struct type accepts, recursively: a struct field is a
// section whose keys follow with "key.", a list of structs one whose keys follow with "key[].".
func configKeys(typ reflect.Type, prefix string) []configKey {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var keys []configKey
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			keys = append(keys, configKeys(f.Type, prefix)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path, ft := prefix+name, f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			keys = append(keys, configKey{path, "section"})
			keys = append(keys, configKeys(ft, path+".")...)
		case ft.Kind() == reflect.Slice && structElem(ft):
			keys = append(keys, configKey{path, "list"})
			keys = append(keys, configKeys(ft.Elem(), path+"[].")...)
		default:
			keys = append(keys, configKey{path, kindOf(ft)})
		}
	}
	return keys
}

func structElem(t reflect.Type) bool {
	e := t.Elem()
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	return e.Kind() == reflect.Struct
}

// kindOf names what a leaf key holds, for the row a failure asks for.
func kindOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + kindOf(t.Elem()) + "s"
	case t.Kind() == reflect.Map:
		return "map"
	case t.Kind() == reflect.Interface:
		return "any"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}

// TestConfigReferenceHasEveryConfigKey: each key of the config file has a row, and each row
// names a key that exists.
func TestConfigReferenceHasEveryConfigKey(t *testing.T) {
	t.Parallel()
	rows := map[string]bool{}
	for _, r := range docTable(t, fileHeading) {
		rows[unquote(r[0])] = true
	}
	for _, k := range configKeys(reflect.TypeFor[config.File](), "") {
		if !rows[k.path] {
			t.Errorf("%s lacks the config-file key %s: add this row to the table under %q:\n| `%s` | %s | DEFAULT | MEANING |", configDoc, k.path, fileHeading, k.path, k.kind)
		}
		delete(rows, k.path)
	}
	for path := range rows {
		t.Errorf("%s documents the config-file key %s, which config.File does not have: remove its row from the table under %q", configDoc, path, fileHeading)
	}
}

// TestConfigKeysAreFound guards the reflection itself: it must see known keys at each depth.
func TestConfigKeysAreFound(t *testing.T) {
	t.Parallel()
	var paths []string
	for _, k := range configKeys(reflect.TypeFor[config.File](), "") {
		paths = append(paths, k.path+" "+k.kind)
	}
	for _, want := range []string{"agents list", "agents[].model section", "agents[].model.baseURL string", "tools[].http.headers map",
		"auth.tokens[].sha256 string", "auth.jwt.claims.resources string", "mcpServers[].approvalTimeout duration"} {
		if !slices.Contains(paths, want) {
			t.Errorf("configKeys misses %q: %v", want, paths)
		}
	}
}
