package observe

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"interlock/runtype"
)

// Operations is the gqlgen extension that writes one log line per GraphQL operation (its
// name, type, duration, outcome with every error code, the principal's subject and the run
// it is about) and counts and times it in the metrics (when Metrics is not nil). Variables
// are never logged: they carry resumeData and edited arguments.
type Operations struct {
	Log     *slog.Logger
	Metrics *Metrics
}

var (
	_ graphql.HandlerExtension     = Operations{}
	_ graphql.OperationInterceptor = Operations{}
	_ graphql.ResponseInterceptor  = Operations{}
)

// ExtensionName names the extension to gqlgen.
func (Operations) ExtensionName() string { return "InterlockOperations" }

// Validate accepts any schema.
func (Operations) Validate(graphql.ExecutableSchema) error { return nil }

type operationKey struct{}

// operation is one operation being answered.
type operation struct {
	ops       Operations
	start     time.Time
	name      string // as logged
	label     string // as a metric label
	typ       string
	transport string
	subject   string
	runID     string

	mu    sync.Mutex
	codes []string
	once  sync.Once
}

// InterceptOperation follows an operation that passed validation to its end: the one answer
// of a query or mutation, or the end of a subscription's stream.
func (o Operations) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := o.begin(ctx, true)
	ctx = context.WithValue(ctx, operationKey{}, op)
	h := next(ctx)
	if op.typ != string(ast.Subscription) {
		return func(ctx context.Context) *graphql.Response {
			resp := h(ctx)
			if resp != nil {
				op.add(resp.Errors)
				if op.runID == "" && op.typ == string(ast.Mutation) {
					op.runID = answeredRun(resp.Data) // startRun: the run it made
				}
			}
			op.end()
			return resp
		}
	}
	if o.Metrics != nil {
		o.Metrics.subscriptions.WithLabelValues(op.transport).Inc()
	}
	// A stream ends with a nil answer; a transport that stops asking ends it with its context.
	stop := context.AfterFunc(ctx, op.end)
	return func(ctx context.Context) *graphql.Response {
		resp := h(ctx)
		if resp == nil {
			stop()
			op.end()
			return nil
		}
		op.add(resp.Errors)
		return resp
	}
}

// InterceptResponse catches the requests refused before an operation began (parse and
// validation errors, limits of depth, complexity and rate), which gqlgen answers without
// InterceptOperation.
func (o Operations) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if _, inOperation := ctx.Value(operationKey{}).(*operation); inOperation || resp == nil {
		return resp
	}
	op := o.begin(ctx, false)
	op.add(resp.Errors)
	op.end()
	return resp
}

// begin describes the operation of ctx. admit says whether its name may take a new label.
func (o Operations) begin(ctx context.Context, admit bool) *operation {
	op := &operation{ops: o, start: time.Now(), transport: transportHTTP}
	op.name, op.typ = OperationOf(ctx)
	if graphql.HasOperationContext(ctx) {
		oc := graphql.GetOperationContext(ctx)
		if !oc.Stats.OperationStart.IsZero() {
			op.start = oc.Stats.OperationStart
		}
		if oc.Operation != nil {
			op.runID = runArgument(oc.Operation, oc.Variables)
		}
	}
	switch {
	case op.name == "anonymous":
		op.label = op.name
	case !validName(op.name):
		op.label = "other"
	default:
		op.label = op.name
		if o.Metrics != nil {
			op.label = o.Metrics.names.label(op.name, admit)
		}
	}
	if req := requestFrom(ctx); req != nil {
		op.transport = req.transport
		req.logged.Store(true)
	}
	if p := runtype.PrincipalFrom(ctx); p != nil && p.Authenticated() {
		op.subject = p.Subject
	}
	return op
}

// runArgument is the runId argument the operation's top-level fields give, when they all
// give the same one.
func runArgument(op *ast.OperationDefinition, vars map[string]any) string {
	found := ""
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || f.Arguments.ForName("runId") == nil {
			continue
		}
		id, _ := f.ArgumentMap(vars)["runId"].(string)
		if id == "" || (found != "" && found != id) {
			return ""
		}
		found = id
	}
	return found
}

// answeredRun is the runId the top-level fields of an answer show, when they all show the
// same one.
func answeredRun(data json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return ""
	}
	found := ""
	for _, raw := range fields {
		var v struct {
			RunID string `json:"runId"`
		}
		if json.Unmarshal(raw, &v) != nil || v.RunID == "" {
			continue
		}
		if found != "" && found != v.RunID {
			return ""
		}
		found = v.RunID
	}
	return found
}

// add notes the codes of errors answered.
func (op *operation) add(errs gqlerror.List) {
	if len(errs) == 0 {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	for _, e := range errs {
		code, _ := e.Extensions["code"].(string)
		if code == "" {
			code = "UNKNOWN"
		}
		if !slices.Contains(op.codes, code) {
			op.codes = append(op.codes, code)
		}
	}
}

// end records the operation once: metrics and its log line.
func (op *operation) end() {
	op.once.Do(func() {
		d := time.Since(op.start)
		op.mu.Lock()
		codes := slices.Clone(op.codes)
		op.mu.Unlock()
		outcome := "ok"
		if len(codes) > 0 {
			outcome = codes[0]
		}
		if m := op.ops.Metrics; m != nil {
			m.operations.WithLabelValues(op.label, op.typ, outcome).Inc()
			if op.typ == string(ast.Subscription) {
				m.subscriptions.WithLabelValues(op.transport).Dec()
			} else {
				m.operationDuration.WithLabelValues(op.label, op.typ, outcome).Observe(d.Seconds())
			}
		}
		attrs := []slog.Attr{
			slog.String("operation", op.name), slog.String("type", op.typ), durationAttr(d),
			slog.String("outcome", outcome), slog.String("transport", op.transport),
		}
		if len(codes) > 0 {
			attrs = append(attrs, slog.Any("codes", codes))
		}
		if op.subject != "" {
			attrs = append(attrs, slog.String("subject", op.subject))
		}
		if op.runID != "" {
			attrs = append(attrs, slog.String("run", op.runID))
		}
		op.ops.Log.LogAttrs(context.Background(), slog.LevelInfo, "graphql", attrs...)
	})
}
