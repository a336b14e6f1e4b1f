// Package llm puts model providers behind one interface: given the conversation so far and the
// tools on offer, a Model streams assistant text and returns the tool calls it wants made.
package llm

import (
	"context"
	"encoding/json"
)

// Role is who wrote a message.
type Role string

// Message roles, as chat-completion APIs name them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation. An assistant message may carry tool calls; a tool
// message answers one of them by ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	ToolName   string     `json:"toolName,omitempty"`
}

// ToolCall is a call the model asked for: which tool, with which JSON arguments.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the tool's arguments.
	Parameters json.RawMessage
}

// Request is one model call.
type Request struct {
	Messages []Message
	Tools    []ToolDef
	// RetryFunc, when set, is called before a call whose answer was cut off is made again: the
	// text already given to onText is void, the next attempt streams its own. An error from it
	// ends the call with that error.
	RetryFunc func() error
}

// Response is what the model produced for a request: its whole text (already streamed through
// the callback) and the tool calls it wants made, in order.
type Response struct {
	Text      string
	ToolCalls []ToolCall
}

// Model is a model provider. Stream calls onText with each piece of assistant text as it arrives
// (an error from onText aborts the call) and returns the complete response.
type Model interface {
	// Name is provider/model, as the API's Agent.model shows it.
	Name() string
	Stream(ctx context.Context, req Request, onText func(delta string) error) (Response, error)
}
