package config_test

import (
	"strings"
	"testing"
	"time"

	"interlock/config"
)

// TestGatewayConfigMistakes: mcpGateway's mistakes stop the start, each naming its path.
func TestGatewayConfigMistakes(t *testing.T) {
	servers := "mcpServers:\n  - {name: files, url: 'http://127.0.0.1:1/mcp'}\n"
	for want, yaml := range map[string]string{
		"mcpGateway.agentId: is required":                     servers + "mcpGateway: {servers: [files]}\n",
		`mcpGateway.agentId: "a" is also the id of an agent`:  servers + "agents:\n  - {id: a, external: true}\nmcpGateway: {agentId: a, servers: [files]}\n",
		"mcpGateway.servers: is required":                     servers + "mcpGateway: {agentId: gw}\n",
		`mcpGateway.servers[1]: "orders" is not the name`:     servers + "mcpGateway: {agentId: gw, servers: [files, orders]}\n",
		`mcpGateway.servers[1]: "files" is listed twice`:      servers + "mcpGateway: {agentId: gw, servers: [files, files]}\n",
		"mcpGateway.wait: must be positive":                   servers + "mcpGateway: {agentId: gw, servers: [files], wait: -1s}\n",
		"mcpGateway.progressInterval: must be at least 100ms": servers + "mcpGateway: {agentId: gw, servers: [files], progressInterval: 1ms}\n",
	} {
		_, err := config.Parse("gw.yaml", []byte(yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n→ %v, want %q", yaml, err, want)
		}
	}
}

// TestBuildGateway: the gateway's agent is external and forwards its calls; its tools are the
// named servers' tools as <server>__<tool>, sorted, gated by each server's requireApproval,
// and only those of its tools: when it has a list; other servers are not exposed; two servers
// may share tool names (the gateway names them by server), which no agent lists.
func TestBuildGateway(t *testing.T) {
	files, other := fileServer(t), fileServer(t)
	a, err := build(t, `mcpServers:
  - name: files
    url: `+files.URL+`
    requireApproval: [write_file]
    approvalTimeout: 10m
    approverRoles: [sre]
    approvals: {required: 2, roles: [storage]}
  - name: backup
    url: `+other.URL+`
    tools: [read_file]
  - name: hidden
    url: `+other.URL+`
mcpGateway:
  agentId: mcp-gateway
  servers: [files, backup]
  wait: 30s
`)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	gw := a.Gateway
	if gw == nil || gw.Wait != 30*time.Second || gw.ProgressInterval != config.DefaultGatewayProgressInterval {
		t.Fatalf("gateway = %+v", gw)
	}
	var names []string
	for _, tl := range gw.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "backup__read_file,files__read_file,files__write_file" {
		t.Fatalf("gateway tools = %v", names)
	}
	ag := gw.Agent
	if !ag.External || !ag.Forwards || ag.ID != "mcp-gateway" || len(a.List) != 1 || a.List[0] != ag {
		t.Fatalf("gateway agent = %+v, agents %d", ag, len(a.List))
	}
	w := ag.Tool("files__write_file")
	if w == nil || !w.RequireApproval || w.ApprovalTimeout != 10*time.Minute || w.ApproverRoles[0] != "sre" || w.ExecuteFunc == nil ||
		w.Quorum() != 2 || w.ApprovalRoles[0] != "storage" {
		t.Fatalf("files__write_file = %+v", w)
	}
	if r := ag.Tool("files__read_file"); r == nil || r.RequireApproval {
		t.Fatalf("files__read_file = %+v, want ungated", r)
	}
	if ag.Tool("hidden__read_file") != nil || ag.Tool("backup__write_file") != nil {
		t.Fatal("a tool of a server the gateway does not name, or one its tools: leaves out, is exposed")
	}
}
