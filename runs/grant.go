package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"interlock/agent"
	"interlock/runtype"
)

// Remembered approvals: "approve, and allow similar". A person approving a call may let later
// calls of the same agent's same tool through without being asked (a runtype.Grant): within a
// scope (the approved run's thread, its resource, or the agent), while their arguments match
// argsMatch, until the grant's TTL passes, at most maxUses times. The rules a risk officer
// signs off are here:
//
//   - A grant never widens beyond the approved call: the same agent and tool, and argsMatch
//     must let the approved call itself through (checked at creation).
//   - Only a principal that may approve the call may create a grant (the decision's own check:
//     approverRoles, separation of duties), and a grant lets a call through only while its
//     creator could approve it: the tool's approverRoles as configured now against the
//     creator's roles — as the server knows them now (Config.PrincipalOf: a static token's),
//     else as they were at creation — and only in resources the creator sees.
//   - A grant never lets through a call of a run its creator started (separation of duties,
//     whatever Config.SeparationOfDuties says: a standing approval is never self-approval),
//     nor a call whose outcome is unknown (an interrupted call always goes to a person).
//   - A use is consumed in the transaction that records the AUTO_APPROVED decision and lets the
//     call run, by one conditional update (Store.UseGrant, InsertRun): a revocation, an expiry
//     or the last use taken by another instance is seen there, never from a cache, and a
//     recovered execution finds the decision in the snapshot and consumes nothing.

// GrantInput is what a person asks to remember with an approval (approveToolCall's remember).
type GrantInput struct {
	Scope runtype.GrantScope
	// TTL, when positive, ends the grant that long after its creation; 0: no end.
	TTL time.Duration
	// MaxUses, when not nil, is how many calls it may let through (at least 1).
	MaxUses *int
	// ArgsMatch constrains the arguments (see ParseArgsMatch); nil or {}: any arguments.
	ArgsMatch json.RawMessage
}

// MaxGrantTTL bounds a grant's TTL: a year. A grant with no TTL has no end but its uses and a
// revocation.
const MaxGrantTTL = 366 * 24 * time.Hour

// argsMatch is a parsed argsMatch: for each JSON pointer, the conditions its value must meet.
type argsMatch []argsCondition

type argsCondition struct {
	pointer  string
	eq       any // decoded with UseNumber; hasEq says whether it is set (eq null is a value)
	hasEq    bool
	lte, gte *big.Rat
}

// ParseArgsMatch reads an argsMatch: a JSON object whose keys are JSON pointers (RFC 6901,
// each starting with "/") into the call's arguments, and whose values are objects of
// conditions on the value there: "eq" (any JSON value, equal as JSON: numbers by value), "lte"
// and "gte" (numbers: the value must be a number at most or at least that). For example
// {"/amount": {"lte": 100}, "/currency": {"eq": "EUR"}}. An empty object or nothing matches
// any arguments. Errors: BAD_USER_INPUT naming what is wrong.
func ParseArgsMatch(raw json.RawMessage) (argsMatch, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, `argsMatch must be a JSON object of JSON pointers to conditions, such as {"/amount": {"lte": 100}}`)
	}
	var out argsMatch
	for ptr, body := range obj {
		if !strings.HasPrefix(ptr, "/") {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch key %q is not a JSON pointer into the arguments: it must start with /, such as /amount", ptr)
		}
		if _, err := pointerTokens(ptr); err != nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch key %q: %v", ptr, err)
		}
		var conds map[string]json.RawMessage
		if err := json.Unmarshal(body, &conds); err != nil || len(conds) == 0 {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, `argsMatch %q must be an object of conditions: "eq", "lte" or "gte"`, ptr)
		}
		c := argsCondition{pointer: ptr}
		for op, v := range conds {
			switch op {
			case "eq":
				val, err := decodeNumbers(v)
				if err != nil {
					return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch %q eq: %v", ptr, err)
				}
				c.eq, c.hasEq = val, true
			case "lte", "gte":
				n, ok := ratOf(v)
				if !ok {
					return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch %q %s must be a number, not %s", ptr, op, v)
				}
				if op == "lte" {
					c.lte = n
				} else {
					c.gte = n
				}
			default:
				return nil, runtype.Errorf(runtype.CodeBadUserInput, `argsMatch %q has condition %q; the conditions are "eq", "lte" and "gte"`, ptr, op)
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b argsCondition) int { return strings.Compare(a.pointer, b.pointer) })
	return out, nil
}

// check says why args do not meet m ("" when they do); strict makes a pointer that is not in
// the arguments, or a bound on a value that is not a number, an input error (at creation,
// against the approved call), rather than a mismatch.
func (m argsMatch) check(args json.RawMessage, strict bool) (string, error) {
	doc, err := decodeNumbers(args)
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	for _, c := range m {
		v, ok := resolvePointer(doc, c.pointer)
		if !ok {
			if strict {
				return "", runtype.Errorf(runtype.CodeBadUserInput, "argsMatch %q is not in the approved call's arguments", c.pointer)
			}
			return fmt.Sprintf("%s is missing", c.pointer), nil
		}
		if c.lte != nil || c.gte != nil {
			num, isNum := v.(json.Number)
			var r *big.Rat
			if isNum {
				r, isNum = new(big.Rat).SetString(num.String())
			}
			if !isNum {
				if strict {
					return "", runtype.Errorf(runtype.CodeBadUserInput, "argsMatch %q bounds a value that is not a number in the approved call's arguments", c.pointer)
				}
				return fmt.Sprintf("%s is not a number", c.pointer), nil
			}
			if c.lte != nil && r.Cmp(c.lte) > 0 {
				return fmt.Sprintf("%s is %s, above %s", c.pointer, num, c.lte.RatString()), nil
			}
			if c.gte != nil && r.Cmp(c.gte) < 0 {
				return fmt.Sprintf("%s is %s, below %s", c.pointer, num, c.gte.RatString()), nil
			}
		}
		if c.hasEq && !jsonEqual(v, c.eq) {
			return fmt.Sprintf("%s differs", c.pointer), nil
		}
	}
	return "", nil
}

func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func ratOf(raw json.RawMessage) (*big.Rat, bool) {
	v, err := decodeNumbers(raw)
	if err != nil {
		return nil, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(n.String())
}

// jsonEqual compares two decoded JSON values (numbers by value).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, oka := new(big.Rat).SetString(x.String())
		rb, okb := new(big.Rat).SetString(y.String())
		return oka && okb && ra.Cmp(rb) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// pointerTokens splits a JSON pointer into its reference tokens (~1 is /, ~0 is ~).
func pointerTokens(ptr string) ([]string, error) {
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1')) {
				return nil, errors.New("~ must be followed by 0 or 1 in a JSON pointer")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func resolvePointer(doc any, ptr string) (any, bool) {
	tokens, err := pointerTokens(ptr)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, t := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[t]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// newGrant checks a GrantInput against decision dec (a person's approval of dec.call, checked
// by checkDecision: the principal may approve it) and returns the grant to store with the
// decision. Errors: BAD_USER_INPUT for a scope the run has nothing for (THREAD without a
// thread, RESOURCE without a resource), a TTL or maxUses out of range, an argsMatch that is
// malformed or would not let the approved call itself through; FORBIDDEN for a grant on a call
// that is not an approval (only approvals are remembered).
func (s *Service) newGrant(ctx context.Context, dec *decision, in GrantInput) (*runtype.Grant, error) {
	if dec.d.Kind != agent.CallApproved || !dec.call.RequiresApproval {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "only an approval can be remembered")
	}
	if dec.d.Args != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "an approval with edited arguments cannot be remembered: approve the call as it is, or remember nothing")
	}
	if dec.call.Interrupted {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "tool call %s was interrupted (its outcome is unknown): its approval cannot be remembered", dec.call.ToolCallID)
	}
	if t := dec.agent.Tool(dec.call.ToolName); t != nil && t.Quorum() > 1 {
		// A grant would let later calls through on one person's word where the tool asks for
		// several (quorum.go).
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "tool %s needs the approvals of %d people: its approval cannot be remembered as a grant", dec.call.ToolName, t.Quorum())
	}
	if !in.Scope.Valid() {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "scope must be THREAD, RESOURCE or AGENT")
	}
	if in.TTL < 0 || in.TTL > MaxGrantTTL {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "ttl must be positive and at most %d seconds (366 days)", int64(MaxGrantTTL/time.Second))
	}
	if in.MaxUses != nil && *in.MaxUses < 1 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "maxUses must be at least 1")
	}
	m, err := ParseArgsMatch(in.ArgsMatch)
	if err != nil {
		return nil, err
	}
	why, err := m.check(dec.call.Args, true)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch does not let the approved call itself through (%s): a grant allows calls similar to the one approved", why)
	}
	r := &dec.run.Run
	g := &runtype.Grant{AgentID: r.AgentID, ToolName: dec.call.ToolName, Scope: in.Scope, ResourceID: r.ResourceID,
		FromRunID: r.ID, FromToolCallID: dec.call.ToolCallID, CreatedAt: s.now()}
	switch in.Scope {
	case runtype.GrantScopeThread:
		if r.ThreadID == nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "run %s has no thread: a THREAD grant needs one (use RESOURCE or AGENT)", r.ID)
		}
		g.ScopeValue = r.ThreadID
	case runtype.GrantScopeResource:
		if r.ResourceID == nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "run %s has no resource: a RESOURCE grant needs one (use THREAD or AGENT)", r.ID)
		}
		g.ScopeValue = r.ResourceID
	}
	if len(m) > 0 {
		if g.ArgsMatch, err = agent.CanonicalJSON(in.ArgsMatch); err != nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "argsMatch: %v", err)
		}
	}
	if in.TTL > 0 {
		end := runtype.StoredTime(g.CreatedAt.Add(in.TTL))
		g.ExpiresAt = &end
	}
	g.MaxUses = in.MaxUses
	p := runtype.PrincipalFrom(ctx)
	g.CreatedBy = p.Recorded()
	g.CreatorRoles = slices.Clone(p.Roles)
	if p.Resources != nil {
		g.CreatorResources = slices.Clone(p.Resources)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new grant id: %w", err)
	}
	g.ID = id.String()
	return g, nil
}

// ApproveAndRemember approves the held call as Approve does and, in the same compare-and-set,
// stores a grant (in) that lets later similar calls through (see the rules above). It returns
// the run as stored right after the decision. A retry of the same approval by the same
// principal is answered with the run as stored, and stores no second grant.
// Errors: those of Approve, and those of newGrant (BAD_USER_INPUT).
func (s *Service) ApproveAndRemember(ctx context.Context, p DecideParams, in GrantInput) (*runtype.Run, error) {
	dec, repeated, err := s.checkDecision(ctx, p, agent.Decision{Kind: agent.CallApproved})
	if err != nil || repeated != nil {
		return repeated, err
	}
	if dec.grant, err = s.newGrant(ctx, dec, in); err != nil {
		return nil, err
	}
	w, err := s.commitDecision(ctx, dec)
	for again := 0; errors.Is(err, ErrStale) && again < 3 && s.onlyNoticed(ctx, dec); again++ {
		// A reminder, escalation or warning appended its event meanwhile (followup.go): check
		// and make the decision again, on the run as it is now, as decide does.
		if dec, repeated, err = s.checkDecision(ctx, p, agent.Decision{Kind: agent.CallApproved}); err != nil || repeated != nil {
			return repeated, err
		}
		if dec.grant, err = s.newGrant(ctx, dec, in); err != nil {
			return nil, err
		}
		w, err = s.commitDecision(ctx, dec)
	}
	if errors.Is(err, ErrStale) {
		return s.lostRace(ctx, dec, w)
	}
	if err != nil {
		return nil, err
	}
	return s.decidedRun(ctx, dec, w), nil
}

// GrantsFilter are the arguments of Grants. Nil fields do not narrow.
type GrantsFilter struct {
	AgentID, ToolName *string
	Scope             *runtype.GrantScope
	Active            *bool
	// Page and PerPage paginate as suspendedRuns does (both or neither).
	Page, PerPage *int
}

// GrantView is a grant as the API shows it: with whether it may still let a call through now,
// as far as the grant itself says (runtype.Grant.Live at the service's clock).
type GrantView struct {
	runtype.Grant
	Active bool
}

func (s *Service) view(list []runtype.Grant) []GrantView {
	now := s.now()
	out := make([]GrantView, len(list))
	for i, g := range list {
		out[i] = GrantView{Grant: g, Active: g.Live(now)}
	}
	return out
}

// Grants lists the grants a principal may see (those of the resources it sees, as runs),
// newest first. Who may call: a viewer. Errors: UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT for
// a bad page.
func (s *Service) Grants(ctx context.Context, f GrantsFilter) ([]GrantView, error) {
	if err := require(ctx, runtype.RoleViewer, "listing grants"); err != nil {
		return nil, err
	}
	p := GrantsParams{AgentID: f.AgentID, ToolName: f.ToolName, Scope: f.Scope, Active: f.Active, At: s.now()}
	resources, none := scope(ctx, nil)
	if none {
		return []GrantView{}, nil
	}
	if f.Scope != nil && !f.Scope.Valid() {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "scope must be THREAD, RESOURCE or AGENT")
	}
	p.Resources = resources
	limit, offset, err := s.page(f.Page, f.PerPage)
	if err != nil {
		return nil, err
	}
	p.Limit, p.Offset = limit, offset
	list, err := s.store.Grants(ctx, p)
	if err != nil {
		return nil, err
	}
	return s.view(list), nil
}

// page turns page/perPage into a limit and offset (0, 0: everything, up to MaxUnpaginated).
func (s *Service) page(page, perPage *int) (limit, offset int, err error) {
	if page == nil && perPage == nil {
		return 0, 0, nil
	}
	if page == nil || perPage == nil {
		return 0, 0, runtype.Errorf(runtype.CodeBadUserInput, "pass both page and perPage, or neither")
	}
	if *perPage < 1 || *perPage > s.cfg.MaxPerPage {
		return 0, 0, runtype.Errorf(runtype.CodeBadUserInput, "perPage must be between 1 and %d", s.cfg.MaxPerPage)
	}
	if *page < 0 {
		return 0, 0, runtype.Errorf(runtype.CodeBadUserInput, "page must not be negative")
	}
	return *perPage, *page * *perPage, nil
}

// RevokeGrant ends a grant at once, on every instance (every use is checked against the table
// in the transaction that would consume it). Who may call: the grant's creator, or an admin,
// among the principals that see its resource. Errors: UNAUTHENTICATED; NOT_FOUND for an
// unknown grant or one the principal may not see; FORBIDDEN for another principal; CONFLICT
// for a grant revoked before (the message says by whom and when).
func (s *Service) RevokeGrant(ctx context.Context, id string) (*GrantView, error) {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return nil, errUnauthenticated("revoking a grant")
	}
	g, err := s.store.Grant(ctx, id)
	if err != nil {
		return nil, err
	}
	if g == nil || !p.Has(runtype.RoleViewer) || !p.Sees(g.ResourceID) {
		return nil, runtype.Errorf(runtype.CodeNotFound, "no grant with id %q", id)
	}
	mine := g.CreatedBy != nil && p.Authenticated() && *g.CreatedBy == p.Subject
	if !mine && !p.Has(runtype.RoleAdmin) {
		return nil, runtype.Errorf(runtype.CodeForbidden, "only the grant's creator or an admin may revoke grant %s; %s has %s", id, p.Subject, roleList(p.Roles))
	}
	if g.RevokedAt != nil {
		return nil, revokedBefore(g)
	}
	at := s.now()
	switch err := s.store.RevokeGrant(ctx, id, p.Recorded(), at); {
	case errors.Is(err, ErrStale):
		if again, rerr := s.store.Grant(ctx, id); rerr == nil && again != nil {
			return nil, revokedBefore(again)
		}
		return nil, runtype.Errorf(runtype.CodeConflict, "grant %s was revoked already", id)
	case errors.Is(err, ErrNoSuchGrant):
		return nil, runtype.Errorf(runtype.CodeNotFound, "no grant with id %q", id)
	case err != nil:
		return nil, err
	}
	g.RevokedAt, g.RevokedBy = &at, p.Recorded()
	s.cfg.Logger.Info("grant revoked", "grant", id, "agent", g.AgentID, "tool", g.ToolName)
	return &GrantView{Grant: *g}, nil
}

func revokedBefore(g *runtype.Grant) error {
	by := "by someone unnamed"
	if g.RevokedBy != nil {
		by = "by " + *g.RevokedBy
	}
	return runtype.Errorf(runtype.CodeConflict, "grant %s was already revoked %s at %s", g.ID, by, g.RevokedAt.UTC().Format("2006-01-02T15:04:05.000Z"))
}

// callSite is what a grant is matched against: the run a call belongs to and the call.
type callSite struct {
	run         *runtype.Run
	tool        *agent.Tool
	name        string
	args        json.RawMessage
	interrupted bool
}

// grantsFor returns the live grants that would let the call at site through now, in the order
// to try them (newest first): the judgement "a live grant matches → let through", which the
// policy's "ask a person" is followed by. Whether a use is left is decided by the write that
// consumes it; this read only narrows the candidates.
func (s *Service) grantsFor(ctx context.Context, site callSite) ([]runtype.Grant, error) {
	if site.interrupted || site.tool == nil {
		return nil, nil // an unknown outcome always goes to a person
	}
	active := true
	now := s.now()
	live, err := s.store.Grants(ctx, GrantsParams{AgentID: &site.run.AgentID, ToolName: &site.name, Active: &active, At: now})
	if err != nil || len(live) == 0 {
		return nil, err
	}
	var out []runtype.Grant
	for _, g := range live {
		if s.grantApplies(&g, site) {
			out = append(out, g)
		}
	}
	return out, nil
}

// grantApplies says whether grant g lets the call at site through, apart from its uses.
func (s *Service) grantApplies(g *runtype.Grant, site callSite) bool {
	r := site.run
	switch g.Scope {
	case runtype.GrantScopeThread:
		if r.ThreadID == nil || g.ScopeValue == nil || *r.ThreadID != *g.ScopeValue {
			return false
		}
	case runtype.GrantScopeResource:
		if r.ResourceID == nil || g.ScopeValue == nil || *r.ResourceID != *g.ScopeValue {
			return false
		}
	case runtype.GrantScopeAgent:
	default:
		return false
	}
	if site.tool.Quorum() > 1 {
		return false // a call that needs several people's approvals is never let through by one grant
	}
	creator := s.creatorOf(g)
	if !creator.Sees(r.ResourceID) {
		return false
	}
	if g.CreatedBy != nil && r.StartedBy != nil && *g.CreatedBy == *r.StartedBy {
		return false // separation of duties: never the creator's own runs
	}
	if !mayApproveTool(creator, site.tool) {
		return false
	}
	m, err := ParseArgsMatch(g.ArgsMatch)
	if err != nil {
		s.cfg.Logger.Warn("grant: stored argsMatch unreadable; the grant lets nothing through", "grant", g.ID, "err", err)
		return false
	}
	why, err := m.check(site.args, false)
	return err == nil && why == ""
}

// creatorOf is the grant's creator as far as the server knows it now: its current principal
// when Config.PrincipalOf knows the subject (a static token), else its roles and resources as
// they were when it created the grant.
func (s *Service) creatorOf(g *runtype.Grant) *runtype.Principal {
	if g.CreatedBy != nil && s.cfg.PrincipalOf != nil {
		if p := s.cfg.PrincipalOf(*g.CreatedBy); p != nil {
			return p
		}
	}
	return &runtype.Principal{Subject: deref(g.CreatedBy), Roles: g.CreatorRoles, Resources: g.CreatorResources}
}

// mayApproveTool says whether p may approve calls of tool as the tool is configured now: the
// rule of authorizeDecision (approverRoles, else the approver role; admins always).
func mayApproveTool(p *runtype.Principal, tool *agent.Tool) bool {
	if len(tool.ApproverRoles) > 0 {
		roles := make([]runtype.Role, len(tool.ApproverRoles))
		for i, r := range tool.ApproverRoles {
			roles[i] = runtype.Role(r)
		}
		return p.Has(runtype.RoleAdmin) || p.HasAny(roles)
	}
	return p.Has(runtype.RoleApprover)
}

// grantReason is the reason recorded with a call a grant let through.
func grantReason(g *runtype.Grant) string {
	by := "someone unnamed"
	if g.CreatedBy != nil {
		by = *g.CreatedBy
	}
	return fmt.Sprintf("auto-approved by grant %s (%s scope, created by %s)", g.ID, strings.ToLower(string(g.Scope)), by)
}
