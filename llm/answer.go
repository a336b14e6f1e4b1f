package llm

import (
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3"
)

// maxAnswerBytes bounds what one streamed answer may hold (text, tool names and arguments): an
// answer past it is refused, never cut silently.
const maxAnswerBytes = 16 << 20

// answer assembles a streamed chat completion: the text and tool calls of choice 0, and whether
// the model said it finished. The SDK's accumulator is not used, because it drops every chunk
// after the completion's id changes (some servers change it mid-stream) and merges parallel tool
// calls sent without an index (some OpenAI-compatible servers do) into one broken call.
type answer struct {
	seen     bool // a chunk carried choice 0
	finished bool // choice 0 carried a finish_reason
	text     strings.Builder
	calls    []*partialCall
	byIndex  map[int64]int // a call's index on the wire → its place in calls
	last     int           // the call the previous tool-call delta added to
	size     int
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

// add takes one chunk and returns the text it adds, false when the answer grew past
// maxAnswerBytes.
func (a *answer) add(chunk openai.ChatCompletionChunk) (string, bool) {
	var text strings.Builder
	for _, c := range chunk.Choices {
		if c.Index != 0 {
			continue // one choice is asked for; others are not the answer
		}
		a.seen = true
		text.WriteString(c.Delta.Content)
		for _, d := range c.Delta.ToolCalls {
			a.addCall(d)
		}
		if c.FinishReason != "" {
			a.finished = true
		}
	}
	a.text.WriteString(text.String())
	a.size += text.Len()
	return text.String(), a.size <= maxAnswerBytes
}

// addCall adds a piece of a tool call. With an index, pieces belong to the call of that index
// (a different id at a known index is a different call: some servers number every call 0).
// Without one, they continue the previous call unless they start a new one: a different id, or
// a name when the previous call has its name already.
func (a *answer) addCall(d openai.ChatCompletionChunkChoiceDeltaToolCall) {
	i := -1
	if d.JSON.Index.Valid() {
		if j, ok := a.byIndex[d.Index]; ok && !differentID(a.calls[j], d.ID) {
			i = j
		}
	} else if len(a.calls) > 0 {
		prev := a.calls[a.last]
		if !differentID(prev, d.ID) && (d.Function.Name == "" || prev.name == "" || (d.ID != "" && d.ID == prev.id)) {
			i = a.last
		}
	}
	if i < 0 {
		a.calls = append(a.calls, &partialCall{})
		i = len(a.calls) - 1
		a.size += 64 // a call's own cost, so that empty calls cannot pile up without bound
	}
	if d.JSON.Index.Valid() {
		if a.byIndex == nil {
			a.byIndex = map[int64]int{}
		}
		a.byIndex[d.Index] = i
	}
	a.last = i
	c := a.calls[i]
	if c.id == "" {
		c.id = d.ID
	}
	if d.Function.Name != "" && d.Function.Name != c.name {
		c.name += d.Function.Name // a name split over chunks is joined, as the SDK does
	}
	c.args.WriteString(d.Function.Arguments)
	a.size += len(d.ID) + len(d.Function.Name) + len(d.Function.Arguments)
}

func differentID(c *partialCall, id string) bool { return id != "" && c.id != "" && id != c.id }

// response is the assembled answer.
func (a *answer) response() Response {
	out := Response{Text: a.text.String()}
	for _, c := range a.calls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.id, Name: c.name, Args: json.RawMessage(c.args.String())})
	}
	return out
}
