package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
)

// Input an MCP server asks for. A server of the 2026-07-28 protocol asks for input by ending the
// call with an input-required result (multi round-trip requests): nothing has run yet, and the
// call is made again with the answers. That fits a run's suspension exactly: the call suspends
// (agent.Call.SuspendFor) with the server's questions as its payload and their schema as its
// resume schema, so the question waits in the database like any other; resumeRun answers it,
// and the call is made again with the person's answer and the server's request state. So the
// SDK's own round trips (which would ask a handler in this process and retry at once) are off.
//
// A server of an older protocol (2025-06-18, 2025-11-25) asks in the middle of the call
// (elicitation/create), while its tools/call is in flight: nothing can be made again, the call
// is running. Such a question is held for a person all the same (askedMidCall, mcp_midcall.go),
// through the call's agent.Call.Ask: the run is stored SUSPENDED on the call (the question as its
// payload, its schema as resume schema) while the instance executing the call keeps the run's
// lease and the call open, and the answer, once a person gives it, is the server's ElicitResult.

// inputPayload is the suspend payload of a call its server asked for input: what a person reads
// (the server's message and the schema of the answer) and, under mcp, what the call is made
// again with.
type inputPayload struct {
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
	MCP             *inputState     `json:"mcp"`
}

// inputState is the server's side of a question: the ids of its input requests, in the order
// of the answer, and its opaque request state, echoed back.
type inputState struct {
	Requests     []string `json:"inputRequests"`
	RequestState string   `json:"requestState,omitempty"`
}

// askedForInput is the suspension of call c whose server answered res with input requests: one
// form question's schema is the resume schema as it is; several are one object keyed by their
// ids. Any other kind of request (a URL to open, a model's completion, the client's roots) is an
// error the tool's caller sees: nobody here can answer it.
func askedForInput(c *agent.Call, server string, res *mcp.CallToolResult) error {
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range res.InputRequests {
			if !yield(id) {
				return
			}
		}
	})
	p := inputPayload{MCP: &inputState{Requests: ids, RequestState: res.RequestState}}
	props, messages := map[string]json.RawMessage{}, []string{}
	for _, id := range ids {
		e, ok := res.InputRequests[id].(*mcp.ElicitParams)
		if !ok || (e.Mode != "" && e.Mode != "form") {
			what := fmt.Sprintf("%T", res.InputRequests[id])
			if ok {
				what = e.Mode + " elicitation"
			}
			return fmt.Errorf("the MCP server %s asked for input Interlock cannot give (%s): only questions a person answers with a form are held for a person", server, strings.TrimPrefix(what, "*mcp."))
		}
		schema, err := json.Marshal(e.RequestedSchema)
		if err != nil || e.RequestedSchema == nil {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		props[id] = schema
		messages = append(messages, e.Message)
	}
	if len(ids) == 0 {
		return fmt.Errorf("the MCP server %s asked for input without saying what (an input-required result with no requests)", server)
	}
	if len(ids) == 1 {
		p.Message, p.RequestedSchema = messages[0], props[ids[0]]
	} else {
		p.Message = strings.Join(messages, "\n")
		schema, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": ids, "additionalProperties": false})
		if err != nil {
			return fmt.Errorf("the schema of the MCP server %s's questions: %w", server, err)
		}
		p.RequestedSchema = schema
	}
	return c.SuspendFor(p, p.RequestedSchema)
}

// answers are the input responses and the request state call c is made again with, when it is
// the call again of a question a person answered (its ResumeData); nil otherwise.
func answers(c *agent.Call) (mcp.InputResponseMap, string, error) {
	if c.ResumeData == nil || c.SuspendPayload == nil {
		return nil, "", nil
	}
	var p inputPayload
	if err := json.Unmarshal(c.SuspendPayload, &p); err != nil || p.MCP == nil {
		return nil, "", nil // suspended by something else: nothing to answer
	}
	var content map[string]any
	if err := json.Unmarshal(c.ResumeData, &content); err != nil {
		return nil, "", fmt.Errorf("the answer to the MCP server's question is not a JSON object: %w", err)
	}
	out := mcp.InputResponseMap{}
	if len(p.MCP.Requests) == 1 {
		out[p.MCP.Requests[0]] = &mcp.ElicitResult{Action: "accept", Content: content}
		return out, p.MCP.RequestState, nil
	}
	for _, id := range p.MCP.Requests {
		part, _ := content[id].(map[string]any)
		out[id] = &mcp.ElicitResult{Action: "accept", Content: part}
	}
	return out, p.MCP.RequestState, nil
}
