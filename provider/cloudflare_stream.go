package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
)

// workersAIEvent is one event of a Workers AI stream: a piece of text
// under "response", tool calls whole (Workers AI does not split them),
// usage in the last event; or, from models that answer in OpenAI's shape,
// a chat.completion.chunk.
type workersAIEvent struct {
	Response  *string             `json:"response"`
	ToolCalls []workersAIToolCall `json:"tool_calls"`
	Usage     *openAIUsage        `json:"usage"`
	Choices   []chunkChoice       `json:"choices"`
	Model     string              `json:"model"`
}

// Stream streams an answer from Workers AI (the input Complete sends,
// with "stream": true), relaying text as it comes and each tool call as
// one whole delta, with the id "call_<n>" when the model gave none, as
// Complete names them. JSON mode does not stream on Workers AI, so a
// request with a response_format is made whole and relayed as one
// answer. Failures are those of Complete, and stream_cut as Streamer
// says.
func (c *Cloudflare) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	path, err := modelPath(req.Model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	body, err := workersAIBody(req.Chat)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	if body.ResponseFormat != nil {
		r, err := c.Complete(ctx, req)
		if err == nil {
			relayWhole(r, onDelta)
		}
		return r, err
	}
	body.Stream = true
	asm := newStreamAssembly()
	out := &Response{}
	status, err := sseCall{
		hc: c.hc, url: c.prefix + path, header: c.headers(), payload: body, key: req.IdempotencyKey, classify: ClassifyCloudflare,
		onData: func(data string) (bool, error) {
			if data == "[DONE]" {
				return true, nil
			}
			var ev workersAIEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return false, malformed(http.StatusOK, err)
			}
			if ev.Model != "" {
				out.Model = ev.Model
			}
			if u := ev.Usage.usage(); u != nil {
				out.Usage = u
			}
			if ev.Choices != nil {
				return false, asm.add(ev.Choices, onDelta)
			}
			return false, asm.addWorkersAI(ev, onDelta)
		},
		whole: func(status int, header http.Header, b []byte) error {
			r, err := parseWorkersAI(status, header, b)
			if err == nil {
				*out = *r
				relayWhole(r, onDelta)
			}
			return err
		},
	}.do(ctx)
	return asm.finish(out, status, err)
}

// addWorkersAI takes one Workers AI event's text and tool calls into the
// one choice Workers AI answers.
func (a *streamAssembly) addWorkersAI(ev workersAIEvent, onDelta func(Delta)) error {
	if (ev.Response == nil || *ev.Response == "") && len(ev.ToolCalls) == 0 {
		return nil
	}
	ca, err := a.choice(0)
	if err != nil {
		return err
	}
	if ev.Response != nil && *ev.Response != "" {
		ca.content.WriteString(*ev.Response)
		onDelta(Delta{Content: *ev.Response})
	}
	for _, tc := range ev.ToolCalls {
		i := len(ca.calls)
		name, args := tc.Name, string(tc.Arguments)
		if tc.Function != nil {
			name, args = tc.Function.Name, string(tc.Function.Arguments)
		}
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(i)
		}
		if err := ca.call(i, id, "function", name, args); err != nil {
			return err
		}
		ca.finish = "tool_calls"
		onDelta(Delta{ToolCall: &ToolCallDelta{Index: i, ID: id, Name: name, Arguments: args}})
	}
	return nil
}
