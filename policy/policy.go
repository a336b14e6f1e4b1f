// Package policy compiles and evaluates approval policies: CEL expressions (cel.dev/cel-go) over a
// tool call that say whether a person must be asked before it runs — `requireApproval: "args.amount
// > 100"` in the config file. An expression is compiled and type-checked once, when the config is
// loaded, so that a mistake stops the server at start with its path; each call then evaluates it
// with a cost limit and a deadline. What a result means for the call (an error asks a person, never
// lets the call through) is decided by the run service (runs/policy.go): this package only
// compiles, evaluates and names a policy's revision.
//
// It imports nothing of the module.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// The limits of one evaluation. A policy runs on every call of its tool, before anyone is asked:
// an expression that walks large arguments must not hold the call, or the server, for long.
const (
	// DefaultCostLimit bounds the work of one evaluation in CEL's cost units (about one per
	// operation: a comparison, a field read, one step of a comprehension). A policy over a
	// call's fields costs tens; a comprehension over a list of a thousand items a few thousand.
	DefaultCostLimit = 100_000
	// DefaultDeadline bounds the time of one evaluation (checked every InterruptEvery steps of
	// a comprehension, and before it starts).
	DefaultDeadline = 100 * time.Millisecond
	// MaxExpressionLength is the longest expression (in characters) a config may give.
	MaxExpressionLength = 4096
	// MaxArgsBytes is the largest arguments (canonical JSON, in bytes) a policy is evaluated
	// over: a call with larger ones is not evaluated (an error: a person is asked).
	MaxArgsBytes = 1 << 20
	// interruptEvery is how many comprehension steps pass between two checks of the deadline.
	interruptEvery = 100
)

// Limits bound an evaluation; zero fields take the defaults.
type Limits struct {
	// Cost is DefaultCostLimit when 0.
	Cost uint64
	// Deadline is DefaultDeadline when 0.
	Deadline time.Duration
}

// The fields of run and principal a policy may read. A field of another name is an error at
// start (a misspelt field would otherwise fail every call, asking a person each time).
var (
	RunFields       = []string{"threadId", "resourceId", "startedBy"}
	PrincipalFields = []string{"subject", "roles", "resources"}
)

// Policy is a compiled expression. It is safe for concurrent use.
type Policy struct {
	source   string
	revision string
	prg      cel.Program
	deadline time.Duration
}

// Input is what an expression reads about one call. A value that is not known is left out of
// its map (a run without a resource has no run.resourceId), so that an expression reading it
// fails — and a person is asked — rather than reading an empty value; has(run.resourceId) tests
// for it.
type Input struct {
	// Args are the call's arguments: canonical JSON of an object (agent.CanonicalJSON).
	Args json.RawMessage
	// Tool is the tool's name, Agent the agent's id.
	Tool, Agent string
	// ThreadID, ResourceID and StartedBy are the run's ("" when it has none).
	ThreadID, ResourceID, StartedBy string
	// Principal is who asks: nil when nobody does (a model's call in a run Interlock executes),
	// so that principal has no fields and an expression reading one asks a person.
	Principal *Principal
}

// Principal is the asker as a policy reads it.
type Principal struct {
	Subject string
	Roles   []string
	// Resources are the only resources the principal may act on; nil: all of them (the key
	// is then absent: `'eu' in principal.resources` fails, and a person is asked).
	Resources []string
}

// env is the environment every policy is compiled in: the variables, CEL's standard library,
// and comparisons across numeric types (JSON numbers are doubles or ints: args.amount > 100
// must hold for 100.5).
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("run", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("principal", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	)
	if err != nil {
		panic("policy: the CEL environment: " + err.Error()) // a programming error, seen by every test
	}
	return e
}()

// Compile parses and type-checks expr, which must be a bool over the variables args, tool, agent,
// run and principal, reading only the fields of run and principal listed above. Its error says
// what is wrong in words a person can act on (with CEL's position in the expression).
func Compile(expr string, limits Limits) (*Policy, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("the expression is empty: give true, false, or a CEL expression such as \"args.amount > 100\"")
	}
	if n := len([]rune(expr)); n > MaxExpressionLength {
		return nil, fmt.Errorf("the expression is %d characters long; at most %d are allowed", n, MaxExpressionLength)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("is not a valid policy: %s", oneLine(iss.Err().Error()))
	}
	if !checked.OutputType().IsExactType(types.BoolType) {
		return nil, fmt.Errorf("is not a valid policy: it gives %s, not a bool (true: ask a person)", checked.OutputType())
	}
	if err := checkFields(checked.NativeRep().Expr()); err != nil {
		return nil, fmt.Errorf("is not a valid policy: %w", err)
	}
	if limits.Cost == 0 {
		limits.Cost = DefaultCostLimit
	}
	if limits.Deadline == 0 {
		limits.Deadline = DefaultDeadline
	}
	prg, err := env.Program(checked, cel.CostLimit(limits.Cost), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("is not a valid policy: %w", err)
	}
	return &Policy{source: expr, revision: Revision(expr), prg: prg, deadline: limits.Deadline}, nil
}

// Revision names a policy's text: "sha256:" and the hex SHA-256 of the expression as written.
// A decision records it, so the audit says which version of a policy let a call through.
func Revision(expr string) string {
	sum := sha256.Sum256([]byte(expr))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Source is the expression as written.
func (p *Policy) Source() string { return p.source }

// Revision is Revision(Source()).
func (p *Policy) Revision() string { return p.revision }

// Evaluate runs the policy over one call and returns its value: true means a person is asked.
// An error — arguments that are not a JSON object or too large, a field the call does not have,
// a value of the wrong type, the cost limit or the deadline exceeded, ctx ended — says why it
// could not be told; the caller asks a person then.
func (p *Policy) Evaluate(ctx context.Context, in Input) (bool, error) {
	vars, err := in.vars()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.deadline)
	defer cancel()
	out, _, err := p.prg.ContextEval(ctx, vars)
	if err != nil {
		return false, evalError(err, ctx)
	}
	v, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("it gave %v, not a bool", out)
	}
	return v, nil
}

// evalError says in plain words why an evaluation failed.
func evalError(err error, ctx context.Context) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cost limit exceeded"):
		return fmt.Errorf("it exceeded its cost limit (%w)", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("it did not finish within its deadline (%w)", err)
	}
	return err
}

// vars are the input's variables as CEL reads them.
func (in Input) vars() (map[string]any, error) {
	if len(in.Args) > MaxArgsBytes {
		return nil, fmt.Errorf("the arguments are %d bytes; a policy reads at most %d", len(in.Args), MaxArgsBytes)
	}
	dec := json.NewDecoder(strings.NewReader(string(in.Args)))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %w", err)
	}
	args, ok := numbers(raw).(map[string]any)
	if !ok {
		return nil, errors.New("the arguments are not a JSON object")
	}
	run := map[string]string{}
	for k, v := range map[string]string{"threadId": in.ThreadID, "resourceId": in.ResourceID, "startedBy": in.StartedBy} {
		if v != "" {
			run[k] = v
		}
	}
	principal := map[string]any{}
	if pr := in.Principal; pr != nil {
		principal["subject"] = pr.Subject
		principal["roles"] = append([]string{}, pr.Roles...)
		if pr.Resources != nil {
			principal["resources"] = append([]string{}, pr.Resources...)
		}
	}
	return map[string]any{"args": args, "tool": in.Tool, "agent": in.Agent, "run": run, "principal": principal}, nil
}

// numbers turns JSON numbers into CEL's: an integer that fits int64 as an int (exact: an id
// of 2^53+1 stays itself), any other number as a double.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
		return x
	}
	return v
}

// checkFields refuses a field of run or principal that is not one of theirs (run.resourceID for
// run.resourceId): CEL's maps take any key, so the checker cannot tell.
func checkFields(e ast.Expr) error {
	var bad error
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if bad != nil || x.Kind() != ast.SelectKind {
			return
		}
		sel := x.AsSelect()
		if sel.Operand().Kind() != ast.IdentKind {
			return
		}
		var known []string
		switch sel.Operand().AsIdent() {
		case "run":
			known = RunFields
		case "principal":
			known = PrincipalFields
		default:
			return
		}
		if !slices.Contains(known, sel.FieldName()) {
			bad = fmt.Errorf("%s has no field %q (its fields: %s)", sel.Operand().AsIdent(), sel.FieldName(), strings.Join(known, ", "))
		}
	}))
	return bad
}

// oneLine is CEL's error text without its excerpts of the expression (" | …" lines, which
// a config error of one line per problem cannot hold): the messages, which give the line and
// column, joined.
func oneLine(msg string) string {
	var out []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "|") {
			out = append(out, strings.TrimPrefix(l, "ERROR: "))
		}
	}
	return strings.Join(out, "; ")
}
