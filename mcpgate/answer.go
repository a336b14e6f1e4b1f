package mcpgate

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/runs"
	"interlock/runtype"
)

// MetaKey is the _meta key under which the gateway's answers say what became of the call's
// request: {"runId", "status", "expiresAt"} (status PENDING, APPROVED, DECLINED, EXPIRED or
// FAILED).
const MetaKey = "io.interlock/approval"

// The texts of the answers that are not the tool's own. A model reads them: each says what
// happened and what to do, in words that cannot be taken for one another.
const (
	declinedText = "A person declined this call in Interlock, so the tool did not run. Their reason: %s"
	noReason     = "(none given)"
	expiredText  = "The approval request for this call expired before anyone decided it, so the tool did not run. %s"
	failedText   = "Interlock could not complete this call: %s. Whether the tool ran is recorded in run %s."
	pendingText  = "This call is waiting for a person's approval in Interlock (request %s): %s. " +
		"It has not run yet. Call the tool again with exactly the same arguments to get its result once a person has decided; " +
		"a call with other arguments is a new request."
	pendingInputText = "This call was approved, and the tool's server asked a question a person answers in Interlock (request %s): %s. " +
		"Call the tool again with exactly the same arguments to get its result once they have answered."
	toolErrorText = "The tool failed: %s"
	// The texts of a call that was sent to its tool once with an outcome nobody knows: never
	// "it did not run".
	interruptedPendingText = "This call was sent to the tool's server once, and whether it took effect is unknown (the server did not answer, or Interlock stopped while it ran). " +
		"It is not sent again unless a person approves it again in Interlock (request %s): %s. Check whether it took effect before you try anything else; " +
		"call the tool again with exactly the same arguments to learn what the person decided."
	interruptedDeclinedText = "A person declined running this call again in Interlock. It was sent to the tool's server once before, and whether that took effect is unknown. Their reason: %s"
	interruptedExpiredText  = "Nobody decided in time whether to run this call again, so it was not sent again. It was sent to the tool's server once before, and whether that took effect is unknown. %s"
)

// answer is the MCP result of a call's outcome: the upstream tool's own result when it ran, or
// an isError result saying why it did not.
func answer(out *runs.CallOutcome) *mcp.CallToolResult {
	meta := outcomeMeta(out)
	switch out.Kind {
	case runs.OutcomeRan:
		if out.Error != "" {
			return errorResult(meta, fmt.Sprintf(toolErrorText, out.Error))
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(out.Result, &res); err != nil {
			return errorResult(meta, fmt.Sprintf(failedText, "the tool's result could not be read", out.Run.ID))
		}
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[MetaKey] = meta
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return &res
	case runs.OutcomeDeclined:
		reason := noReason
		if out.Decision.Reason != nil && *out.Decision.Reason != "" {
			reason = *out.Decision.Reason
		}
		if out.Interrupted {
			return errorResult(meta, fmt.Sprintf(interruptedDeclinedText, reason))
		}
		return errorResult(meta, fmt.Sprintf(declinedText, reason))
	case runs.OutcomeExpired:
		reason := ""
		if out.Decision.Reason != nil {
			reason = *out.Decision.Reason
		}
		if out.Interrupted {
			return errorResult(meta, fmt.Sprintf(interruptedExpiredText, reason))
		}
		return errorResult(meta, fmt.Sprintf(expiredText, reason))
	default:
		msg := "the run ended on an error"
		if out.Run.Error != nil {
			msg = *out.Run.Error
		}
		return errorResult(meta, fmt.Sprintf(failedText, msg, out.Run.ID))
	}
}

// pending is the answer to a call still waiting when Wait passed: not an error (nothing
// failed), saying where a person decides it and that calling again gets the outcome.
//
// A client of the 2026-07-28 protocol that can open URLs for its user (URL elicitation) is
// asked instead, with the spec's input-required result, to open the request in the console (a
// link without credentials: the person signs in there). Whatever it answers, it calls again,
// and the call is answered or asked again: an "accept" is the client's word, never a decision —
// only a decision in Interlock lets the call run.
func (g *gateway) pending(req *mcp.CallToolRequest, out *runs.CallOutcome) *mcp.CallToolResult {
	link := runURL(req.Extra.Header, out.Run.ID)
	if caps := req.ClientCapabilities(); req.ProtocolVersion() >= sessionlessVersion && caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"interlock-approval": &mcp.ElicitParams{
				Mode: "url", URL: link, ElicitationID: out.Run.ID,
				Message: "This call waits for a person's approval in Interlock. Open the request to see it, or to decide it if you may.",
			}},
			RequestState: out.Run.ID, // informative only: a retry is matched by what it calls, never by this
		}
	}
	text := fmt.Sprintf(pendingText, out.Run.ID, link)
	switch {
	case out.Interrupted:
		text = fmt.Sprintf(interruptedPendingText, out.Run.ID, link)
	case len(out.Run.ToolCalls) > 0 && !out.Run.ToolCalls[0].RequiresApproval:
		text = fmt.Sprintf(pendingInputText, out.Run.ID, link)
	}
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{MetaKey: outcomeMeta(out)},
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
	}
}

// outcomeMeta is the MetaKey object of an outcome.
func outcomeMeta(out *runs.CallOutcome) map[string]any {
	m := map[string]any{"runId": out.Run.ID}
	switch out.Kind {
	case runs.OutcomePending:
		m["status"] = "PENDING"
		if len(out.Run.ToolCalls) > 0 && out.Run.ToolCalls[0].ExpiresAt != nil {
			m["expiresAt"] = out.Run.ToolCalls[0].ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
	case runs.OutcomeRan:
		m["status"] = "APPROVED"
	default:
		m["status"] = string(out.Kind)
	}
	if out.Interrupted {
		m["interrupted"] = true // sent once, outcome unknown
	}
	if d := out.Decision; d != nil {
		if d.DecidedBy != nil {
			m["decidedBy"] = *d.DecidedBy
		}
		if d.Receipt != nil && out.Kind == runs.OutcomeRan {
			m["receipt"] = *d.Receipt
		}
	}
	return m
}

// refused is the answer to a call the run service refused before storing anything: an
// isError result with the reason (a model can correct bad arguments; a person reads the rest),
// and the code. An error of Interlock's own is not described.
func refused(err error) *mcp.CallToolResult {
	var re *runtype.Error
	if !errors.As(err, &re) {
		return errorResult(nil, "Interlock could not take this call (an internal error); try again later.")
	}
	return errorResult(map[string]any{"code": string(re.Code)}, fmt.Sprintf("Interlock refused this call (%s): %s", re.Code, re.Message))
}

func errorResult(meta map[string]any, text string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if meta != nil {
		res.Meta = mcp.Meta{MetaKey: meta}
	}
	return res
}
