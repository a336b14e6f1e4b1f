package approvals

// What Claude Code's and Codex's PermissionRequest hooks send, and what they accept back: the body
// is read into a hookRequest (refused with a message naming the field when it is not one), mapped
// onto an approval request (threadId the session, the context Markdown, the tool's name and
// input), and a decision becomes the agent's own answer. The references these follow, with the
// documented bodies, are in testdata/hooks and the README's "Coding-agent permission hooks".

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"interlock/agent"
	"interlock/hidden"
)

// hookAgent is the coding agent a hook endpoint speaks for.
type hookAgent string

const (
	claudeCode hookAgent = "claude-code"
	codex      hookAgent = "codex"
)

// name is how the agent is named to a person.
func (a hookAgent) name() string {
	if a == codex {
		return "Codex"
	}
	return "Claude Code"
}

// permissionRequest is the only hook event the endpoints answer (both agents name it so).
const permissionRequest = "PermissionRequest"

// hookRequest is what Interlock reads of a PermissionRequest body; the rest is ignored.
type hookRequest struct {
	SessionID      string
	HookEventName  string
	ToolName       string
	ToolInput      json.RawMessage // canonical form (agent.CanonicalJSON), a JSON object
	Cwd            string
	PermissionMode string
	TranscriptPath string
	// Turn is Codex's turn_id or Claude Code's prompt_id: the same call asked again within it is
	// the same request (neither agent sends a tool-call id with this event).
	Turn string
	// Model is Codex's model; AgentType the subagent's type (both agents), when the hook fires in one.
	Model     string
	AgentID   string
	AgentType string
}

// hookBody is the body as sent: the fields of both agents; every one is optional to the decoder,
// and parseHook says which are required.
type hookBody struct {
	SessionID      *string         `json:"session_id"`
	HookEventName  *string         `json:"hook_event_name"`
	ToolName       *string         `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	Cwd            *string         `json:"cwd"`
	PermissionMode *string         `json:"permission_mode"`
	TranscriptPath *string         `json:"transcript_path"`
	TurnID         *string         `json:"turn_id"`
	PromptID       *string         `json:"prompt_id"`
	Model          *string         `json:"model"`
	AgentID        *string         `json:"agent_id"`
	AgentType      *string         `json:"agent_type"`
}

// parseHook reads a PermissionRequest body of agent a. Its error is a message a person can act on
// (the endpoint answers it as 400): the body is not a JSON object, a required field is missing or
// of the wrong type, or the event is not PermissionRequest.
func parseHook(a hookAgent, body []byte) (hookRequest, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return hookRequest{}, fmt.Errorf("the body is empty: %s sends the hook's JSON input as the POST body", a.name())
	}
	if body[0] != '{' {
		return hookRequest{}, fmt.Errorf("the body is not a JSON object: %s sends the hook's JSON input (session_id, hook_event_name, tool_name, tool_input, …) as the POST body", a.name())
	}
	if err := checkHookFields(body); err != nil {
		return hookRequest{}, err
	}
	var b hookBody
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return hookRequest{}, fmt.Errorf("the body is not the JSON input of a %s hook: %s", a.name(), jsonProblem(err))
	}
	if dec.More() {
		return hookRequest{}, fmt.Errorf("the body holds more than one JSON value")
	}
	var r hookRequest
	missing := func(field string) error {
		return fmt.Errorf("the body has no %s: it is not the input of a %s PermissionRequest hook", field, a.name())
	}
	switch {
	case b.HookEventName == nil:
		return r, missing("hook_event_name")
	case *b.HookEventName != permissionRequest:
		return r, fmt.Errorf("hook_event_name is %q: this endpoint answers only %s's PermissionRequest hook (configure it under \"PermissionRequest\")", *b.HookEventName, a.name())
	case b.SessionID == nil || strings.TrimSpace(*b.SessionID) == "":
		return r, missing("session_id")
	case b.ToolName == nil || strings.TrimSpace(*b.ToolName) == "":
		return r, missing("tool_name")
	case len(b.ToolInput) == 0 || string(b.ToolInput) == "null":
		return r, missing("tool_input")
	}
	if bytes.TrimSpace(b.ToolInput)[0] != '{' {
		return r, fmt.Errorf("tool_input is not a JSON object: the arguments of %s's %s call must be an object", a.name(), *b.ToolName)
	}
	input, err := agent.CanonicalJSON(b.ToolInput)
	if err != nil {
		return r, fmt.Errorf("tool_input is %v", err)
	}
	r = hookRequest{
		SessionID:     *b.SessionID,
		HookEventName: *b.HookEventName,
		ToolName:      *b.ToolName,
		ToolInput:     input,
	}
	for _, f := range []struct {
		to   *string
		from *string
	}{{&r.Cwd, b.Cwd}, {&r.PermissionMode, b.PermissionMode}, {&r.TranscriptPath, b.TranscriptPath},
		{&r.Model, b.Model}, {&r.AgentID, b.AgentID}, {&r.AgentType, b.AgentType}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if a == codex && b.TurnID != nil {
		r.Turn = *b.TurnID
	} else if a == claudeCode && b.PromptID != nil {
		r.Turn = *b.PromptID
	}
	return r, nil
}

// hookFields are the names of hookBody's fields, as they must be spelled.
var hookFields = func() []string {
	t := reflect.TypeFor[hookBody]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}()

// checkHookFields reads the names of a body's top-level fields (the only level decoded into
// named fields: tool_input's objects are checked by agent.CanonicalJSON, which refuses a key
// twice at any depth, and read by exact name) and refuses a name given twice, or spelled in
// another case than a field's: encoding/json matches names regardless of case (strings.EqualFold,
// which is its rule) and keeps the last of a repeated one, so that a body read one way by whatever
// passed it on — or shown by a log — would be read another way here. Other names are the agent's
// fields Interlock does not read, and pass. nil when the body is not JSON: the decoder says why.
func checkHookFields(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil
		}
		if seen[name] {
			return fmt.Errorf("the body has the field %q twice: which one is meant cannot be told", name)
		}
		seen[name] = true
		for _, f := range hookFields {
			if name != f && strings.EqualFold(name, f) {
				return fmt.Errorf("the body has a field %q: field names are case-sensitive, and the hook's field is %q", name, f)
			}
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
	}
	return nil
}

// jsonProblem says what is wrong with a body encoding/json refused, without Go's type names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s is a JSON %s, not a string", te.Field, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// idempotencyKey names the request to Interlock's agent agentID, with context md, so that the
// same call asked again in the same session and turn while it waits (a hook the agent sends
// again) joins the same run: neither agent sends a tool-call id with PermissionRequest, so the
// key is a digest of the coding agent, the session, the turn, the subagent, the tool, its input
// and the context (which holds the working directory and the permission mode). The same key may
// thus stand for a later call of the same command (Claude Code sends no turn at all): the hooks
// ask with runs.ApprovalParams.KeyWhilePending, so that once decided the key makes a new request.
func (r hookRequest) idempotencyKey(a hookAgent, agentID, md string) string {
	h := sha256.New()
	for _, part := range []string{string(a), agentID, r.SessionID, r.Turn, r.AgentID, r.ToolName, string(r.ToolInput), md} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return "hook:" + string(a) + ":" + hex.EncodeToString(h.Sum(nil))
}

// contextMarkdown is what the person is shown beside the call: which agent asks, where, in which
// session, and the command and description the agent gave. Every value the agent sent stays
// inside the place the server gives it, so that nothing it holds reads as the server's own
// words: names, paths and the command are code (their fences longer than any backticks inside,
// so they cannot end early), the description is quoted line by line, and in all of them every
// character that could end a line or change how the text reads — a carriage return, a line or
// paragraph separator, any control character, a bidi control, an invisible character — is
// written as its visible mark (hidden.Reveal: ⟨U+000D⟩), in a code span a newline too. Clients
// render it as safe Markdown (the console builds DOM nodes, never HTML, and links only http(s)).
func (r hookRequest) contextMarkdown(a hookAgent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** asks to run %s", a.name(), codeSpan(r.ToolName))
	if r.Cwd != "" {
		fmt.Fprintf(&b, " in %s", codeSpan(r.Cwd))
	}
	b.WriteString(".\n\n")
	var input map[string]json.RawMessage
	_ = json.Unmarshal(r.ToolInput, &input) // an object: parseHook checked
	if d := stringField(input, "description"); d != "" {
		for _, line := range strings.Split(hidden.Reveal(cut(d, maxDescription)), "\n") {
			b.WriteString("> " + line + "\n")
		}
		b.WriteString("\n")
	}
	if c := stringField(input, "command"); c != "" {
		lang := ""
		if r.ToolName == "Bash" {
			lang = "sh"
		}
		b.WriteString(codeBlock(cut(c, maxCommand), lang))
	} else if p := stringField(input, "file_path"); p != "" {
		fmt.Fprintf(&b, "File: %s\n\n", codeSpan(p))
	}
	var facts []string
	facts = append(facts, "session "+codeSpan(r.SessionID))
	if r.Turn != "" {
		facts = append(facts, map[hookAgent]string{codex: "turn ", claudeCode: "prompt "}[a]+codeSpan(r.Turn))
	}
	if r.AgentType != "" {
		facts = append(facts, "subagent "+codeSpan(r.AgentType))
	}
	if r.PermissionMode != "" {
		facts = append(facts, "permission mode "+codeSpan(r.PermissionMode))
	}
	if r.Model != "" {
		facts = append(facts, "model "+codeSpan(r.Model))
	}
	b.WriteString(strings.Join(facts, " · ") + "\n")
	return b.String()
}

// How much of the agent's description and command the context quotes: the arguments hold them
// whole, and a context is at most runs.MaxContextLength characters.
const (
	maxDescription = 2000
	maxCommand     = 8000
)

// cut is s, or its first n characters and a note of how many more the arguments hold.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("\n… (%d more characters: see the arguments)", len(r)-n)
}

func stringField(m map[string]json.RawMessage, key string) string {
	var s string
	if raw, ok := m[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// codeSpan quotes s as inline code, with a run of backticks longer than any inside it, on one
// line: newlines and every hidden character are marks (hidden.RevealLine).
func codeSpan(s string) string {
	s = hidden.RevealLine(s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// codeBlock quotes s as a fenced code block, its fence longer than any run of backticks in it,
// every hidden character but newlines and tabs a mark (hidden.Reveal).
func codeBlock(s, lang string) string {
	s = hidden.Reveal(s)
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + fence + "\n\n"
}

func longestRun(s string, c rune) int {
	longest, n := 0, 0
	for _, r := range s {
		if r == c {
			n++
			longest = max(longest, n)
		} else {
			n = 0
		}
	}
	return longest
}

// hookOutcome is how a request ended, as far as the hook's answer goes.
type hookOutcome struct {
	kind hookOutcomeKind
	// args are the edited arguments (outcomeEdited).
	args json.RawMessage
	// reason is the person's reason (outcomeDeclined, may be empty).
	reason    string
	decidedBy string
	// at is when it was decided or expired; waited how long the hook was held (outcomeUndecided).
	at     time.Time
	waited time.Duration
}

type hookOutcomeKind int

const (
	outcomeApproved  hookOutcomeKind = iota // approved as asked
	outcomeEdited                           // approved with edited arguments
	outcomeDeclined                         // declined, with or without a reason
	outcomeExpired                          // the tool's approvalTimeout passed without a decision
	outcomeUndecided                        // nobody decided within the hook's wait
)

// permissionAnswer is the answer both agents read: {"hookSpecificOutput": {"hookEventName":
// "PermissionRequest", "decision": {...}}}, with no other field (Codex refuses unknown ones).
type permissionAnswer struct {
	HookSpecificOutput struct {
		HookEventName string             `json:"hookEventName"`
		Decision      permissionDecision `json:"decision"`
	} `json:"hookSpecificOutput"`
}

type permissionDecision struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// answer is agent a's JSON for outcome o:
//   - approved: allow;
//   - approved with edited arguments: Claude Code allows with updatedInput (it replaces the whole
//     input, as the edited arguments do; its PermissionRequest answer has no field that tells
//     the model so); Codex fails closed on updatedInput, so it is told deny, with a message
//     telling the model the arguments that were approved: the original call does not run;
//   - declined: deny, the person's reason as the message (a message saying who declined when no
//     reason was given);
//   - expired, undecided: deny, the message saying that nobody decided in time.
//
// Text in it carries the characters, not JSON's HTML escapes (agent.ReadableJSON).
func (o hookOutcome) answer(a hookAgent) []byte {
	var out permissionAnswer
	out.HookSpecificOutput.HookEventName = permissionRequest
	d := &out.HookSpecificOutput.Decision
	by := "a person"
	if o.decidedBy != "" {
		by = o.decidedBy
	}
	switch o.kind {
	case outcomeApproved:
		d.Behavior = "allow"
	case outcomeEdited:
		if a == claudeCode {
			d.Behavior = "allow"
			d.UpdatedInput = json.RawMessage(agent.ReadableJSON(o.args))
			break
		}
		d.Behavior = "deny"
		d.Message = fmt.Sprintf("Not run as asked: %s approved this call in Interlock only with edited arguments, which Codex cannot take from a hook. The approved arguments: %s", by, agent.ReadableJSON(o.args))
	case outcomeDeclined:
		d.Behavior = "deny"
		d.Message = o.reason
		if strings.TrimSpace(d.Message) == "" {
			d.Message = fmt.Sprintf("Declined in Interlock by %s, without a reason.", by)
		}
	case outcomeExpired:
		d.Behavior = "deny"
		d.Message = fmt.Sprintf("Not approved: the request expired in Interlock at %s without a decision.", o.at.UTC().Format(time.RFC3339))
	case outcomeUndecided:
		d.Behavior = "deny"
		d.Message = fmt.Sprintf("Not approved: nobody decided in Interlock within %s.", o.waited.Round(time.Second))
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // the message is text for a model and a person: "a > b", not "a \u003e b"
	if err := enc.Encode(out); err != nil {
		panic(err) // strings and canonical JSON only
	}
	return bytes.TrimSuffix(body.Bytes(), []byte("\n"))
}
