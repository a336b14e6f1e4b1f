package observe

import (
	"context"
	"time"

	"interlock/agent"
	"interlock/llm"
)

// timedModel is a model whose calls are timed and whose failures are counted.
type timedModel struct {
	llm.Model
	m *Metrics
}

func (t *timedModel) Stream(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	start := time.Now()
	resp, err := t.Model.Stream(ctx, req, onText)
	name := t.Name()
	t.m.modelDuration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if failed(ctx, err) {
		t.m.modelErrors.WithLabelValues(name).Inc()
	}
	return resp, err
}

// Agents instruments the agents' models and tools in place, before they are registered: each
// model call and tool execution is timed by model or tool name and its failures counted. A
// tool shared by several agents is wrapped once.
func (m *Metrics) Agents(list []*agent.Agent) {
	seen := map[*agent.Tool]bool{}
	for _, a := range list {
		if _, done := a.Model.(*timedModel); !done && a.Model != nil {
			a.Model = &timedModel{Model: a.Model, m: m}
			m.modelDuration.WithLabelValues(a.Model.Name()) // present at 0 from the start
			m.modelErrors.WithLabelValues(a.Model.Name())
		}
		for _, t := range a.Tools {
			if seen[t] || t.ExecuteFunc == nil {
				continue
			}
			seen[t] = true
			t.ExecuteFunc = m.timedTool(t.Name, t.ExecuteFunc)
		}
	}
}

func (m *Metrics) timedTool(name string, exec func(context.Context, *agent.Call) (any, error)) func(context.Context, *agent.Call) (any, error) {
	hist, errs := m.toolDuration.WithLabelValues(name), m.toolErrors.WithLabelValues(name)
	return func(ctx context.Context, call *agent.Call) (v any, err error) {
		start := time.Now()
		ok := false
		defer func() {
			hist.Observe(time.Since(start).Seconds())
			if !ok || (failed(ctx, err) && !agent.IsSuspend(err)) {
				errs.Inc() // a panic (ok unset; it goes on to the loop's recover) or an error
			}
		}()
		v, err = exec(ctx, call)
		ok = true
		return v, err
	}
}
