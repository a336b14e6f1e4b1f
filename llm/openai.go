package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIConfig configures an OpenAI-compatible chat-completions model: OpenAI itself, or any
// server that speaks its wire format (Ollama, vLLM, LM Studio, OpenRouter).
type OpenAIConfig struct {
	// BaseURL is the API root, such as http://127.0.0.1:11434/v1. Default: OpenAI's.
	BaseURL string
	// Model is the model name the server knows, such as gpt-4o-mini or llama3.1.
	Model string
	// APIKey is sent as a bearer token; empty for servers that need none.
	APIKey string
	// Temperature and MaxTokens are sent when set.
	Temperature *float64
	MaxTokens   int
	// Timeout bounds one model call, streaming included. Default 2 minutes.
	Timeout time.Duration
	// MaxRetries is how often a call answered 429 or 5xx (or not answered) is made again, with
	// backoff that honours Retry-After. Default 3; negative means none.
	MaxRetries int
	// HTTPClient replaces the default client (tests, proxies).
	HTTPClient *http.Client
}

// OpenAI is a Model over the chat-completions API, streamed, with tool calls, through the
// official SDK (which also does the retries).
type OpenAI struct {
	cfg    OpenAIConfig
	client openai.Client
}

var _ Model = (*OpenAI)(nil)

// NewOpenAI returns the model. It does not call the server.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: a model name is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	retries := cfg.MaxRetries
	if retries == 0 {
		retries = 3
	}
	retries = max(retries, 0)
	opts := []option.RequestOption{option.WithMaxRetries(retries), option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &OpenAI{cfg: cfg, client: openai.NewClient(opts...)}, nil
}

// Name is "openai/<model>".
func (m *OpenAI) Name() string { return "openai/" + m.cfg.Model }

// Stream makes one streamed chat completion. Text goes to onText as it arrives; tool calls,
// whose arguments arrive in pieces over many chunks, are returned assembled, in order.
func (m *OpenAI) Stream(ctx context.Context, req Request, onText func(string) error) (Response, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	params, err := m.params(req)
	if err != nil {
		return Response{}, err
	}
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			if c.Index == 0 && c.Delta.Content != "" {
				if err := onText(c.Delta.Content); err != nil {
					return Response{}, err
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return Response{}, m.callError(ctx, err)
	}
	if len(acc.Choices) == 0 {
		return Response{}, &ProviderError{Provider: m.Name(), Message: "the answer has no choices"}
	}
	msg := acc.Choices[0].Message
	out := Response{Text: msg.Content}
	for _, tc := range msg.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)})
	}
	return out, nil
}

// params turns the conversation and the tools into the request body.
func (m *OpenAI) params(req Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.Model)}
	if m.cfg.Temperature != nil {
		p.Temperature = openai.Float(*m.cfg.Temperature)
	}
	if m.cfg.MaxTokens > 0 {
		p.MaxTokens = openai.Int(int64(m.cfg.MaxTokens))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			p.Messages = append(p.Messages, openai.SystemMessage(msg.Content))
		case RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(msg.Content))
		case RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(msg.Content, msg.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: argumentsText(tc.Args)},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, fmt.Errorf("openai: message role %q is not supported", msg.Role)
		}
	}
	for _, t := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &def.Parameters); err != nil {
				return p, fmt.Errorf("openai: the input schema of tool %s is not a JSON object: %w", t.Name, err)
			}
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(def))
	}
	return p, nil
}

// argumentsText is the arguments as the API carries them: a string of JSON. Arguments the
// model sent that were not JSON are kept by the agent as a JSON string; they go back as sent.
func argumentsText(args json.RawMessage) string {
	var s string
	if json.Unmarshal(args, &s) == nil {
		return s
	}
	return string(args)
}

// ProviderError is a model call the provider refused or that could not be made. It says which
// provider and, when there was an answer, its HTTP status; never the request's credentials.
type ProviderError struct {
	Provider string
	// Status is the HTTP status of the answer, 0 when there was none (timeout, connection).
	Status  int
	Message string
}

func (e *ProviderError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s answered HTTP %d: %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

// callError maps an SDK error (after its retries) to a ProviderError.
func (m *OpenAI) callError(ctx context.Context, err error) error {
	var api *openai.Error
	switch {
	case errors.As(err, &api):
		msg := http.StatusText(api.StatusCode)
		if api.Message != "" {
			msg = api.Message
		}
		if m.cfg.APIKey != "" {
			msg = strings.ReplaceAll(msg, m.cfg.APIKey, "[api key]") // some servers echo it
		}
		return &ProviderError{Provider: m.Name(), Status: api.StatusCode, Message: msg}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &ProviderError{Provider: m.Name(), Message: fmt.Sprintf("no complete answer within %s", m.cfg.Timeout)}
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return &ProviderError{Provider: m.Name(), Message: err.Error()}
	}
}
