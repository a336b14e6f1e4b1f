package observe

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"interlock/agent"
	"interlock/llm"
)

// TestToolCallsCountFailuresNotSuspensions: an error and a panic count as failures of the
// tool; a suspend() and a success do not; every execution is timed.
func TestToolCallsCountFailuresNotSuspensions(t *testing.T) {
	m := NewMetrics("test")
	tools := map[string]*agent.Tool{}
	for name, exec := range map[string]func(context.Context, *agent.Call) (any, error){
		"ok":     func(context.Context, *agent.Call) (any, error) { return "done", nil },
		"fails":  func(context.Context, *agent.Call) (any, error) { return nil, errors.New("backend down") },
		"waits":  func(_ context.Context, c *agent.Call) (any, error) { return nil, c.Suspend("why?") },
		"panics": func(context.Context, *agent.Call) (any, error) { panic("bug") },
	} {
		tools[name] = &agent.Tool{Name: name, ExecuteFunc: exec}
	}
	a := &agent.Agent{ID: "a", Model: &llm.Demo{}}
	for _, tl := range tools {
		a.Tools = append(a.Tools, tl)
	}
	m.Agents([]*agent.Agent{a, a}) // twice: wrapped once
	for _, tl := range tools {
		func() {
			defer func() { _ = recover() }()
			tl.ExecuteFunc(t.Context(), &agent.Call{})
		}()
	}
	for name, want := range map[string]float64{"ok": 0, "fails": 1, "waits": 0, "panics": 1} {
		if got := testutil.ToFloat64(m.toolErrors.WithLabelValues(name)); got != want {
			t.Errorf("errors of %s = %v, want %v", name, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.toolDuration); n != 4 {
		t.Errorf("%d tool series, want 4", n)
	}
	if _, ok := a.Model.(*timedModel); !ok {
		t.Fatalf("model not instrumented: %T", a.Model)
	}
	if _, ok := a.Model.(*timedModel).Model.(*timedModel); ok {
		t.Fatal("model instrumented twice")
	}
}

// TestModelCallsCountFailuresNotCancellations: a model error is counted; a call cancelled
// with its context (shutdown, lost lease) is not.
func TestModelCallsCountFailuresNotCancellations(t *testing.T) {
	m := NewMetrics("test")
	model := &timedModel{Model: failingModel{}, m: m}
	model.Stream(t.Context(), llm.Request{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	model.Stream(ctx, llm.Request{}, nil)
	if got := testutil.ToFloat64(m.modelErrors.WithLabelValues("test/failing")); got != 1 {
		t.Fatalf("model errors = %v, want 1", got)
	}
}

type failingModel struct{}

func (failingModel) Name() string { return "test/failing" }
func (failingModel) Stream(ctx context.Context, _ llm.Request, _ func(string) error) (llm.Response, error) {
	if ctx.Err() != nil {
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{}, errors.New("overloaded")
}
