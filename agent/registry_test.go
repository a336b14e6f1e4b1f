package agent_test

import (
	"slices"
	"testing"

	"interlock/agent"
)

// TestRegistriesShareDefinitions: one set of definitions given to two registries with different
// middleware (two apps in one process, or two tests) gives two sets of agents, each calling
// through its own registry's middleware only; building the second changes nothing of the first.
func TestRegistriesShareDefinitions(t *testing.T) {
	t.Parallel()
	tr := &trail{}
	m := &model{turns: []turn{ask(call("m1", "lookup_order", `{"orderId":"1"}`)), say("Done.")}}
	shared := lookup()
	def := &agent.Agent{ID: "first", Model: m, Tools: []*agent.Tool{shared.Tool}}
	one, err := agent.NewRegistry([]*agent.Agent{def}, named{"one", tr})
	if err != nil {
		t.Fatal(err)
	}
	two, err := agent.NewRegistry([]*agent.Agent{def}, named{"two", tr})
	if err != nil {
		t.Fatal(err)
	}
	if one.Get("first") == two.Get("first") || one.Get("first") == def || one.Get("first").Tools[0] == shared.Tool {
		t.Fatal("the registries hold the definitions themselves, not copies of their own")
	}
	run(t, one.Get("first"), agent.NewSnapshot(nil, "go", false), &host{})
	want := []string{"one model", "one tool lookup_order", "one model"}
	if got := tr.take(); !slices.Equal(got, want) {
		t.Errorf("the first registry's agent called %q, want %q", got, want)
	}
}
