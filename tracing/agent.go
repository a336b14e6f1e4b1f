package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"interlock/agent"
	"interlock/llm"
)

// Attribute keys of model and tool spans, from OpenTelemetry's generative-AI conventions, and the
// outcome Interlock adds to both.
const (
	keyOperation = attribute.Key("gen_ai.operation.name")
	keyModel     = attribute.Key("gen_ai.request.model")
	keyToolName  = attribute.Key("gen_ai.tool.name")
	keyToolCall  = attribute.Key("gen_ai.tool.call.id")
	keyOutcome   = attribute.Key("interlock.outcome")
	keyRunID     = attribute.Key("interlock.run.id")
	keyAgentID   = attribute.Key("interlock.agent.id")
)

// Agents is the agent.Middleware that traces what agents call, for agent.NewRegistry: each model
// call becomes a span "chat MODEL" and each tool execution a span "execute_tool TOOL", children
// of the execution's span, with their outcome (ok or error; a tool also suspended or panicked).
// Wrapping the agents' models and tools keeps the agent loop free of tracing. Off, it is nil:
// nothing is wrapped.
func (t *Tracing) Agents() agent.Middleware {
	if t == nil {
		return nil
	}
	return agentSpans{t}
}

// agentSpans is the middleware Agents returns.
type agentSpans struct{ t *Tracing }

var _ agent.Middleware = agentSpans{}

func (w agentSpans) WrapModel(m llm.Model) llm.Model {
	return &tracedModel{Model: m, tracer: w.t.tracer}
}

func (w agentSpans) WrapTool(tool *agent.Tool, exec agent.ToolFunc) agent.ToolFunc {
	return w.t.traceTool(tool.Name, exec)
}

// tracedModel is a model whose calls are spans.
type tracedModel struct {
	llm.Model
	tracer trace.Tracer
}

var _ llm.Model = (*tracedModel)(nil)

func (m *tracedModel) Stream(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	ctx, span := m.tracer.Start(ctx, "chat "+m.Name(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(keyOperation.String("chat"), keyModel.String(m.Name()),
			attribute.Int("interlock.model.messages", len(req.Messages)), attribute.Int("interlock.model.tools", len(req.Tools))))
	defer span.End()
	resp, err := m.Model.Stream(ctx, req, onText)
	if err != nil {
		span.SetAttributes(keyOutcome.String("error"))
		span.RecordError(err)
		span.SetStatus(codes.Error, "model call failed")
		return resp, err
	}
	span.SetAttributes(keyOutcome.String("ok"), attribute.Int("interlock.model.tool_calls", len(resp.ToolCalls)))
	return resp, nil
}

// traceTool wraps a tool's ExecuteFunc in a span. A panic is recorded and goes on up, where the
// loop turns it into an error result.
func (t *Tracing) traceTool(name string, exec agent.ToolFunc) agent.ToolFunc {
	return func(ctx context.Context, call *agent.Call) (v any, err error) {
		ctx, span := t.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(keyOperation.String("execute_tool"), keyToolName.String(name), keyToolCall.String(call.ID),
				keyRunID.String(call.Run.RunID), keyAgentID.String(call.Run.AgentID), attribute.Bool("interlock.tool.resumed", call.Resumed())))
		defer span.End()
		defer func() {
			if r := recover(); r != nil {
				span.SetAttributes(keyOutcome.String("panic"))
				span.SetStatus(codes.Error, fmt.Sprintf("tool %s panicked", name))
				panic(r)
			}
		}()
		v, err = exec(ctx, call)
		switch {
		case err == nil:
			span.SetAttributes(keyOutcome.String("ok"))
		case agent.IsSuspension(err):
			span.SetAttributes(keyOutcome.String("suspended"))
		default:
			span.SetAttributes(keyOutcome.String("error"))
			span.RecordError(err)
			span.SetStatus(codes.Error, "tool failed")
		}
		return v, err
	}
}
