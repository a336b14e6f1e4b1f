package llm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// MaxRetries is how often a call answered 429 or 5xx (or not answered, or whose answer was
	// cut off) is made again, with backoff that honours Retry-After. Default 3; negative means
	// none.
	MaxRetries int
	// HTTPClient replaces the default client (tests, proxies).
	HTTPClient *http.Client
}

// OpenAI is a Model over the chat-completions API, streamed, with tool calls, through the
// official SDK (which also does the retries).
type OpenAI struct {
	cfg     OpenAIConfig
	retries int // MaxRetries with its default
	client  openai.Client
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
	return &OpenAI{cfg: cfg, retries: retries, client: openai.NewClient(opts...)}, nil
}

// Name is "openai/<model>".
func (m *OpenAI) Name() string { return "openai/" + m.cfg.Model }

// Stream makes one streamed chat completion. Text goes to onText as it arrives; tool calls,
// whose arguments arrive in pieces over many chunks, are returned assembled, in order.
//
// An answer whose stream ends before the model finished it (no finish_reason and no [DONE], or
// the connection cut) is not an answer: the call is made again, sharing MaxRetries with the
// SDK's own retries, after req.RetryFunc says that the text streamed so far is void. When no
// retry is left, the error wraps ErrCutOff.
func (m *OpenAI) Stream(ctx context.Context, req Request, onText func(string) error) (Response, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	params, err := m.params(req)
	if err != nil {
		return Response{}, err
	}
	made := 0 // HTTP requests made, retries included
	for attempt := 0; ; attempt++ {
		resp, err := m.attempt(ctx, params, onText, &made)
		if !errors.Is(err, ErrCutOff) || made > m.retries {
			return resp, err
		}
		select {
		case <-time.After(retryDelay(attempt)):
		case <-ctx.Done():
			return Response{}, m.callError(ctx, ctx.Err())
		}
		if req.RetryFunc != nil {
			if err := req.RetryFunc(); err != nil {
				return Response{}, err
			}
		}
	}
}

// ErrCutOff is an answer whose stream ended before the model finished it.
var ErrCutOff = errors.New("the answer stream ended before the model finished it")

// retryDelay is the wait before a cut-off call is made again: 0.5s, doubling, at most 8s, as the
// SDK waits between its own retries.
func retryDelay(attempt int) time.Duration {
	return min(500*time.Millisecond<<min(attempt, 4), 8*time.Second)
}

// attempt makes the call once (with the SDK's retries for what remains of the budget, counted
// in made) and reads its stream to the end.
func (m *OpenAI) attempt(ctx context.Context, params openai.ChatCompletionNewParams, onText func(string) error, made *int) (Response, error) {
	var body *watchedBody // the body of the answer being read
	watch := func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		*made++
		res, err := next(r)
		if err == nil && res.StatusCode/100 == 2 {
			body = &watchedBody{ReadCloser: res.Body}
			res.Body = body
		}
		return res, err
	}
	stream := m.client.Chat.Completions.NewStreaming(ctx, params,
		option.WithMaxRetries(max(m.retries-*made, 0)), option.WithMiddleware(watch))
	defer stream.Close()
	var a answer
	for stream.Next() {
		text, ok := a.add(stream.Current())
		if !ok {
			return Response{}, &ProviderError{Provider: m.Name(), Message: fmt.Sprintf("the answer is larger than %d MiB", maxAnswerBytes>>20)}
		}
		if text != "" {
			if err := onText(text); err != nil {
				return Response{}, err
			}
		}
	}
	err := stream.Err()
	switch {
	case ctx.Err() != nil || (err != nil && (body == nil || body.err == nil)):
		// No answer, or one the SDK refused (an error event, a chunk that is not JSON).
		return Response{}, m.callError(ctx, cmp.Or(err, ctx.Err()))
	case err != nil || (!a.finished && (body == nil || !body.done)):
		why := "neither finish_reason nor [DONE] arrived"
		if err != nil {
			why = body.err.Error()
		}
		return Response{}, &ProviderError{Provider: m.Name(), Message: fmt.Sprintf("%v (%s)", ErrCutOff, why), Err: ErrCutOff}
	case !a.seen:
		return Response{}, &ProviderError{Provider: m.Name(), Message: "the answer has no choices"}
	}
	return a.response(), nil
}

// watchedBody is an answer's body, read through to see how its stream ends: with a [DONE]
// line, or with a read error (the connection cut).
type watchedBody struct {
	io.ReadCloser
	line []byte // the start of the line being read
	long bool   // the line is longer than what is kept of it
	done bool
	err  error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' || c == '\r':
			if v, ok := bytes.CutPrefix(b.line, []byte("data:")); ok && !b.long && bytes.HasPrefix(bytes.TrimLeft(v, " "), []byte("[DONE]")) {
				b.done = true
			}
			b.line, b.long = b.line[:0], false
		case len(b.line) < 32:
			b.line = append(b.line, c)
		default:
			b.long = true
		}
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
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
	// Err is what the failure is, when it is one callers tell apart (ErrCutOff).
	Err error
}

func (e *ProviderError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s answered HTTP %d: %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

func (e *ProviderError) Unwrap() error { return e.Err }

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
