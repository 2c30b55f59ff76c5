package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// streamChunk is one chat.completion.chunk.
type streamChunk struct {
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             *openAIUsage    `json:"usage"`
	Error             json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content   *string `json:"content"`
		Refusal   *string `json:"refusal"`
		ToolCalls []struct {
			Index    int    `json:"index"`
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string        `json:"name"`
				Arguments argumentsText `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// maxStreamIndex bounds the choice and tool-call indices a stream may
// name, so that a broken server cannot make the assembly allocate without
// end; OpenAI allows at most 128 choices.
const maxStreamIndex = 1024

// streamAssembly builds a Response's choices from a stream's fragments.
type streamAssembly struct {
	byIndex map[int]*choiceAssembly
}

type choiceAssembly struct {
	content, refusal strings.Builder
	finish           string
	calls            map[int]*callAssembly
	// logprobs gathers the content and refusal token lists of every
	// chunk, in order, into one object as a whole answer carries it.
	logContent, logRefusal []json.RawMessage
	logSeen                bool
}

type callAssembly struct {
	id, typ, name string
	args          strings.Builder
}

func newStreamAssembly() *streamAssembly {
	return &streamAssembly{byIndex: map[int]*choiceAssembly{}}
}

func (a *streamAssembly) seen() bool { return len(a.byIndex) > 0 }

// choice is the assembly of the i-th choice. It fails, as
// malformed_response, for an index out of bounds.
func (a *streamAssembly) choice(i int) (*choiceAssembly, error) {
	if i < 0 || i >= maxStreamIndex {
		return nil, malformed(http.StatusOK, errors.New("choice index out of bounds"))
	}
	ca := a.byIndex[i]
	if ca == nil {
		ca = &choiceAssembly{calls: map[int]*callAssembly{}}
		a.byIndex[i] = ca
	}
	return ca, nil
}

// call adds a fragment of the index-th tool call. It fails, as
// malformed_response, for an index out of bounds.
func (ca *choiceAssembly) call(index int, id, typ, name, args string) error {
	if index < 0 || index >= maxStreamIndex {
		return malformed(http.StatusOK, errors.New("tool call index out of bounds"))
	}
	c := ca.calls[index]
	if c == nil {
		c = &callAssembly{}
		ca.calls[index] = c
	}
	if id != "" {
		c.id = id
	}
	if typ != "" {
		c.typ = typ
	}
	if name != "" {
		c.name = name
	}
	c.args.WriteString(args)
	return nil
}

// add takes one chunk's choices, relaying each fragment to onDelta. It
// fails, as malformed_response, for an index out of bounds.
func (a *streamAssembly) add(choices []chunkChoice, onDelta func(Delta)) error {
	for _, c := range choices {
		ca, err := a.choice(c.Index)
		if err != nil {
			return err
		}
		if d := c.Delta.Content; d != nil && *d != "" {
			ca.content.WriteString(*d)
			onDelta(Delta{Choice: c.Index, Content: *d})
		}
		if d := c.Delta.Refusal; d != nil && *d != "" {
			ca.refusal.WriteString(*d)
			onDelta(Delta{Choice: c.Index, Refusal: *d})
		}
		for _, tc := range c.Delta.ToolCalls {
			args := string(tc.Function.Arguments)
			if err := ca.call(tc.Index, tc.ID, tc.Type, tc.Function.Name, args); err != nil {
				return err
			}
			if tc.ID == "" && tc.Function.Name == "" && args == "" {
				continue
			}
			onDelta(Delta{Choice: c.Index, ToolCall: &ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: args}})
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			ca.finish = *c.FinishReason
		}
		if hasJSON(c.Logprobs) {
			var lp struct {
				Content []json.RawMessage `json:"content"`
				Refusal []json.RawMessage `json:"refusal"`
			}
			if err := json.Unmarshal(c.Logprobs, &lp); err != nil {
				return malformed(http.StatusOK, err)
			}
			ca.logSeen = true
			ca.logContent = append(ca.logContent, lp.Content...)
			ca.logRefusal = append(ca.logRefusal, lp.Refusal...)
		}
	}
	return nil
}

// finish completes a streamed Response from what the assembly holds and
// decides its error: err as is, else empty_output, or content_policy when
// the filter ended the choices, for a stream that brought no answer.
func (a *streamAssembly) finish(out *Response, status int, err error) (*Response, error) {
	if a.seen() {
		out.Choices = a.choices()
	}
	if len(out.Choices) == 0 {
		out.Choices = []Choice{{Message: Message{Role: "assistant"}}}
	}
	out.Status = status
	if err != nil {
		return out, err
	}
	if !answered(out.Choices) {
		if a.filtered() {
			return out, &Error{Class: ClassRejected, Status: status, Code: CodeContentPolicy}
		}
		return out, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput, cause: errors.New("empty stream")}
	}
	return out, nil
}

// choices is the assembled answer, choices and tool calls in index order.
func (a *streamAssembly) choices() []Choice {
	var out []Choice
	for _, i := range slices.Sorted(maps.Keys(a.byIndex)) {
		ca := a.byIndex[i]
		ch := Choice{Index: i, FinishReason: ca.finish, Message: Message{Role: "assistant", Content: Text(ca.content.String()), Refusal: ca.refusal.String()}}
		for _, j := range slices.Sorted(maps.Keys(ca.calls)) {
			call := ca.calls[j]
			typ := call.typ
			if typ == "" {
				typ = "function"
			}
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, ToolCall{ID: call.id, Type: typ, Function: FunctionCall{Name: call.name, Arguments: call.args.String()}})
		}
		if ca.logSeen {
			ch.Logprobs = logprobsObject(ca.logContent, ca.logRefusal)
		}
		out = append(out, ch)
	}
	return out
}

// filtered reports whether the provider's filter ended any choice.
func (a *streamAssembly) filtered() bool {
	for _, ca := range a.byIndex {
		if ca.finish == "content_filter" {
			return true
		}
	}
	return false
}

// logprobsObject is {"content": [...], "refusal": [...]}, a list null
// when no chunk carried it, as a whole answer reads.
func logprobsObject(content, refusal []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	list := func(items []json.RawMessage) {
		if items == nil {
			b.WriteString("null")
			return
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(compactJSON(it))
		}
		b.WriteByte(']')
	}
	b.WriteString(`{"content":`)
	list(content)
	b.WriteString(`,"refusal":`)
	list(refusal)
	b.WriteByte('}')
	return b.Bytes()
}
