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

// Agents is the agent.Middleware that measures what agents call, for agent.NewRegistry: each
// model call and tool execution is timed by model or tool name and its failures counted. The
// series of every model and tool are there, at 0, from the start.
func (m *Metrics) Agents() agent.Middleware { return agentTimes{m} }

// agentTimes is the middleware Agents returns.
type agentTimes struct{ m *Metrics }

var _ agent.Middleware = agentTimes{}

func (w agentTimes) WrapModel(model llm.Model) llm.Model {
	w.m.modelDuration.WithLabelValues(model.Name()) // present at 0 from the start
	w.m.modelErrors.WithLabelValues(model.Name())
	return &timedModel{Model: model, m: w.m}
}

func (w agentTimes) WrapTool(t *agent.Tool, exec agent.ToolFunc) agent.ToolFunc {
	return w.m.timedTool(t.Name, exec)
}

func (m *Metrics) timedTool(name string, exec agent.ToolFunc) agent.ToolFunc {
	hist, errs := m.toolDuration.WithLabelValues(name), m.toolErrors.WithLabelValues(name)
	return func(ctx context.Context, call *agent.Call) (v any, err error) {
		start := time.Now()
		ok := false
		defer func() {
			hist.Observe(time.Since(start).Seconds())
			if !ok || (failed(ctx, err) && !agent.IsSuspension(err)) {
				errs.Inc() // a panic (ok unset; it goes on to the loop's recover) or an error
			}
		}()
		v, err = exec(ctx, call)
		ok = true
		return v, err
	}
}
