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
	mw := m.Agents()
	for name, exec := range map[string]agent.ToolFunc{
		"ok":     func(context.Context, *agent.Call) (any, error) { return "done", nil },
		"fails":  func(context.Context, *agent.Call) (any, error) { return nil, errors.New("backend down") },
		"waits":  func(_ context.Context, c *agent.Call) (any, error) { return nil, c.Suspend("why?") },
		"panics": func(context.Context, *agent.Call) (any, error) { panic("bug") },
	} {
		timed := mw.WrapTool(&agent.Tool{Name: name, ExecuteFunc: exec}, exec)
		func() {
			defer func() { _ = recover() }()
			timed(t.Context(), &agent.Call{})
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
	if _, ok := mw.WrapModel(&llm.Demo{}).(*timedModel); !ok {
		t.Fatal("model not instrumented")
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
