// Package tools makes agent tools out of things outside the process: an HTTP endpoint that
// answers a JSON POST, or a tool of an MCP server. A failure of the backend that leaves nothing
// done (a refused connection, a non-2xx answer, a body that is not the expected JSON) becomes a
// tool error the model sees, never a failed run: the model can try again or tell the user. A
// request that may have reached the backend and got no answer — its connection broke, or the
// answer did not come within the timeout — is never sent again: its outcome is unknown
// (agent.OutcomeUnknown), and a person decides (for a timeout, when the call needed approval).
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"

	"interlock/agent"
)

// HTTPConfig is an HTTP tool: each call is one POST of an HTTPRequest to URL.
type HTTPConfig struct {
	URL string
	// Timeout bounds one call. Default 30 s.
	Timeout time.Duration
	// Headers are sent with every call (already expanded from the environment).
	Headers map[string]string
	// Client replaces http.DefaultClient (tests, proxies). Its CheckRedirect is replaced: a
	// call follows a redirect only within the URL's origin (see sameOriginRedirects).
	Client *http.Client
}

// HTTPRequest is the body of an HTTP tool call. ResumeData and SuspendPayload are set when the
// tool is called again after it suspended and a person resumed the run.
type HTTPRequest struct {
	Args           json.RawMessage `json:"args"`
	RunID          string          `json:"runId"`
	ToolCallID     string          `json:"toolCallId"`
	AgentID        string          `json:"agentId"`
	ThreadID       string          `json:"threadId,omitempty"`
	ResourceID     string          `json:"resourceId,omitempty"`
	ResumeData     json.RawMessage `json:"resumeData,omitempty"`
	SuspendPayload json.RawMessage `json:"suspendPayload,omitempty"`
}

// HTTPResponse is what the endpoint answers: a result, or a payload to suspend the run with
// (shown to a person, whose resumeData comes back in the next call).
type HTTPResponse struct {
	Result  json.RawMessage `json:"result"`
	Suspend json.RawMessage `json:"suspend"`
}

// maxHTTPAnswer bounds what is read of an answer: a tool result goes into the model's context
// and the database, so megabytes of it are a mistake of the endpoint.
const maxHTTPAnswer = 1 << 20

// HTTPExecute returns an ExecuteFunc that calls the endpoint.
func HTTPExecute(cfg HTTPConfig) func(ctx context.Context, c *agent.Call) (any, error) {
	client := withRedirectPolicy(cfg.Client)
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return func(parent context.Context, c *agent.Call) (any, error) {
		// Without HTML escaping, the arguments go out byte for byte as the API showed them
		// (json.Marshal would write "<" as "\u003c").
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(false)
		err := enc.Encode(HTTPRequest{
			Args: c.Args, RunID: c.Run.RunID, ToolCallID: c.ID, AgentID: c.Run.AgentID,
			ThreadID: c.Run.ThreadID, ResourceID: c.Run.ResourceID,
			ResumeData: c.ResumeData, SuspendPayload: c.SuspendPayload,
		})
		if err != nil {
			return nil, fmt.Errorf("encode the request: %w", err)
		}
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, &body)
		if err != nil {
			return nil, fmt.Errorf("build the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		for k, v := range cfg.Headers {
			req.Header.Set(k, v)
		}
		if c.Receipt != "" {
			req.Header.Set(ApprovalHeader, c.Receipt) // after the config's: it cannot be overridden
		}
		// Whether the request was written to the connection: a connection that breaks after
		// that leaves the outcome unknown (the endpoint may have acted), which is a person's to
		// judge, not an error the model may answer by calling again.
		d := &delivery{}
		req = req.WithContext(httptrace.WithClientTrace(withDelivery(ctx, d), &httptrace.ClientTrace{
			WroteRequest: func(w httptrace.WroteRequestInfo) { d.sent.Store(w.Err == nil) },
		}))
		resp, err := client.Do(req)
		if redirect, ok := asRedirectError(err); ok {
			return nil, fmt.Errorf("the tool's endpoint %w", redirect)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil {
				return nil, timedOut(c.Name, timeout, d.wasSent())
			}
			if d.wasSent() && ctx.Err() == nil {
				return nil, brokeAfterSending(c.Name, err)
			}
			return nil, fmt.Errorf("the tool's endpoint could not be reached: %w", unwrapURL(err))
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer+1))
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil {
				return nil, timedOut(c.Name, timeout, true) // it answered, in part: it had the request
			}
			if ctx.Err() == nil {
				return nil, brokeAfterSending(c.Name, err)
			}
			return nil, fmt.Errorf("read the answer: %w", err)
		}
		if len(raw) > maxHTTPAnswer {
			return nil, fmt.Errorf("the tool's answer is larger than %d bytes", maxHTTPAnswer)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return nil, fmt.Errorf("the tool's endpoint answered HTTP %d: %s", resp.StatusCode, snippet(raw))
		}
		var out HTTPResponse
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("the tool's answer is not JSON of the form {\"result\": …} or {\"suspend\": …}: %s", snippet(raw))
		}
		switch {
		case len(out.Suspend) > 0 && string(out.Suspend) != "null":
			return nil, c.Suspend(out.Suspend)
		case len(out.Result) > 0:
			return out.Result, nil
		}
		return nil, errors.New(`the tool's answer has neither "result" nor "suspend"`)
	}
}

// brokeAfterSending is the unknown outcome of a call whose connection broke after its request
// was written (err says how): the endpoint may have acted on it.
func brokeAfterSending(tool string, err error) error {
	return &agent.OutcomeUnknown{Reason: fmt.Sprintf("the connection to the endpoint of %s broke after the request was sent (%v), so whether it took effect is unknown; approve to run it again or decline", tool, unwrapURL(err))}
}

// timedOut is the error of a call whose answer did not come within timeout. A request never
// written to a connection did nothing: that is a tool error the model may answer by trying
// again. A request that was sent may have been carried out — the endpoint may be slow, or done
// and stuck before answering — so its outcome is unknown, as when the connection breaks after
// sending (brokeAfterSending), and it is not sent again by Interlock: a call that needed
// approval waits for a person's new decision; one nobody gates is answered to the model as a
// timeout (agent.OutcomeUnknown.ModelError says why the two differ).
func timedOut(tool string, timeout time.Duration, sent bool) error {
	msg := fmt.Sprintf("the tool's endpoint did not answer within %s", timeout)
	if !sent {
		return errors.New(msg)
	}
	return &agent.OutcomeUnknown{
		Reason:     fmt.Sprintf("the endpoint of %s did not answer within %s after the request was sent, so whether it took effect is unknown; approve to run it again or decline", tool, timeout),
		ModelError: msg,
	}
}

// unwrapURL drops the "Post \"url\":" prefix net/http puts before the cause.
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// snippet is the start of an answer, for an error message the model can act on.
func snippet(b []byte) string {
	const n = 200
	s := string(bytes.TrimSpace(b))
	if len(s) > n {
		s = s[:n] + "…"
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
