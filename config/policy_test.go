package config_test

import (
	"strings"
	"testing"

	"interlock/config"
)

// TestPolicyErrorsNameTheirPath: a requireApproval expression that does not compile, is not a
// bool, reads a field run or principal does not have, or is of another YAML type stops the
// server at start, each problem on its line with its path.
func TestPolicyErrorsNameTheirPath(t *testing.T) {
	t.Parallel()
	yaml := `
agents:
  - id: ext
    external: true
    tools: [refund, deploy, lookup, other]
tools:
  - name: refund
    requireApproval: "args.amount >"
  - name: deploy
    requireApproval: "args.env"
  - name: lookup
    requireApproval: "run.resourceID.startsWith('vip-')"
  - name: other
    requireApproval: [true]
mcpServers:
  - name: pay
    url: http://127.0.0.1:1/mcp
    requireApproval:
      refund: "tool == 1"
      "*": true
`
	_, err := config.Parse("test.yaml", []byte(yaml))
	if err == nil {
		t.Fatal("a file with bad policies was accepted")
	}
	for _, want := range []string{
		"tools[0].requireApproval: is not a valid policy: <input>:1:14: Syntax error",
		"tools[1].requireApproval: is not a valid policy: it gives dyn, not a bool",
		`tools[2].requireApproval: is not a valid policy: run has no field "resourceID" (its fields: threadId, resourceId, startedBy)`,
		"tools[3].requireApproval: must be true, false, or a CEL expression in quotes",
		"mcpServers[0].requireApproval.refund: is not a valid policy: <input>:1:6: found no matching overload for '_==_' applied to '(string, int)'",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n  "); n != 5 {
		t.Errorf("%d problems, want 5, one per line:\n%v", n, err)
	}
}

// TestPolicyBuild: an expression becomes the tool's Policy (its source and revision), a bool its
// RequireApproval; the "*" tool's policy is that of any tool name; a server's map gives each
// tool its rule, "*" the others'; a tool of tools: naming a server's tool asks when either asks.
func TestPolicyBuild(t *testing.T) {
	h := fileServer(t)
	a, err := build(t, `
agents:
  - id: ext
    external: true
    tools: [refund, plain, "*"]
  - id: m
    model: {provider: demo}
    tools: [read_file, write_file, write]
tools:
  - name: refund
    requireApproval: "args.amount > 100 || run.resourceId.startsWith('vip-')"
  - name: plain
    requireApproval: true
  - name: "*"
    requireApproval: "tool.startsWith('Write')"
  - name: write
    mcp: {server: files, tool: write_file}
    requireApproval: "args.size > 10"
mcpServers:
  - name: files
    url: `+h.URL+`
    requireApproval:
      write_file: "args.path.startsWith('/etc')"
      "*": false
`)
	if err != nil {
		t.Fatal(err)
	}
	ext, m := a.List[0], a.List[1]
	if r := ext.Tool("refund"); r.Policy == nil || r.Policy.Source() != "args.amount > 100 || run.resourceId.startsWith('vip-')" || !strings.HasPrefix(r.Policy.Revision(), "sha256:") {
		t.Fatalf("refund: %+v", r)
	}
	if p := ext.Tool("plain"); p.Policy != nil || !p.RequireApproval {
		t.Fatalf("plain: %+v", p)
	}
	if any := ext.Tool("WriteFile"); any.Policy == nil || any.Policy.Source() != "tool.startsWith('Write')" {
		t.Fatalf("any tool: %+v", any)
	}
	if r := m.Tool("read_file"); r.Policy != nil || r.RequireApproval {
		t.Fatalf("read_file: %+v", r)
	}
	if w := m.Tool("write_file"); w.Policy == nil || w.Policy.Source() != "args.path.startsWith('/etc')" {
		t.Fatalf("write_file: %+v", w)
	}
	if w := m.Tool("write"); w.Policy == nil || w.Policy.Source() != "(args.size > 10) || (args.path.startsWith('/etc'))" {
		t.Fatalf("write: %+v", w.Policy)
	}
	_, err = build(t, "agents:\n  - id: m\n    model: {provider: demo}\n    tools: [read_file]\n"+
		"mcpServers:\n  - name: files\n    url: "+h.URL+"\n    requireApproval: {read-file: \"true\"}\n")
	if want := `test.yaml: mcpServers[0].requireApproval.read-file: "read-file" is not a tool files lists (it lists: read_file, write_file)`; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}
