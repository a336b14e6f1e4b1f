package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// delegatePrefix starts the name of every tool through which a supervisor delegates to one of
// its sub-agents.
const delegatePrefix = "delegate_to_"

var notToolNameRe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// DelegateToolName is the name of the tool through which a supervisor delegates to the sub-agent
// with that id: model providers accept only [a-zA-Z0-9_-] in tool names, so anything else in
// the id becomes "_".
func DelegateToolName(agentID string) string {
	return delegatePrefix + notToolNameRe.ReplaceAllString(agentID, "_")
}

// delegateInput is the input schema of every delegate tool: the task, in words, that the
// sub-agent's run starts with as its prompt.
var delegateInput = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","minLength":1,"description":"The task for the sub-agent, with every detail it needs"}},"required":["task"]}`)

// delegateTools builds, for each of a's sub-agents, the tool the model calls to hand it a task.
// A call of such a tool is not executed by the loop: the run waits on it (CallDelegated) while
// the sub-agent's run executes, and continues with its outcome (CallReturned).
func delegateTools(a *Agent) ([]*Tool, error) {
	var out []*Tool
	for _, sub := range a.SubAgents {
		name := DelegateToolName(sub.ID)
		if a.Tool(name) != nil {
			return nil, fmt.Errorf("agent %q: tool %q clashes with the tool that delegates to sub-agent %q", a.ID, name, sub.ID)
		}
		for _, t := range out {
			if t.Name == name {
				return nil, fmt.Errorf("agent %q: sub-agents %q and %q have the same delegate tool %q", a.ID, t.SubAgent.ID, sub.ID, name)
			}
		}
		desc := sub.Description
		if desc == "" {
			desc = sub.Name
		}
		t := &Tool{
			Name:        name,
			Description: fmt.Sprintf("Delegate a task to the sub-agent %s: %s", sub.ID, desc),
			InputSchema: delegateInput,
			SubAgent:    sub,
		}
		var err error
		if t.input, err = CompileSchema(a.ID+"/"+name+"/input", t.InputSchema); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Task reads the task of a delegate call's arguments (already checked against its schema).
func Task(args json.RawMessage) (string, error) {
	var in struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("delegate arguments: %w", err)
	}
	return in.Task, nil
}

// Delegated returns the call the run waits on while a sub-agent's run executes, or nil.
func (s *Snapshot) Delegated() *PendingCall {
	for i := range s.Pending {
		if s.Pending[i].State == CallDelegated {
			return &s.Pending[i]
		}
	}
	return nil
}

// Return hands the outcome of the sub-agent run childRunID to the call that waits on it: its
// result (JSON), or errMsg when it failed. The loop records it as the call's result when the
// run continues. ErrUnknownCall when no call waits on that run.
func (s *Snapshot) Return(childRunID string, result json.RawMessage, errMsg string) error {
	c := s.Delegated()
	if c == nil || c.ChildRunID != childRunID {
		return ErrUnknownCall
	}
	c.State, c.Result, c.ResultError = CallReturned, result, errMsg
	return nil
}
