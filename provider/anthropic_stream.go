package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

type anthropicStreamRequest struct {
	messagesRequest
	Stream bool `json:"stream"`
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Model string         `json:"model"`
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *anthropicAnswerBlock `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	// Usage, on message_delta, holds cumulative counts; the input figures
	// are present only when they changed since message_start.
	Usage *struct {
		OutputTokens             tokenCount  `json:"output_tokens"`
		InputTokens              *tokenCount `json:"input_tokens"`
		CacheCreationInputTokens *tokenCount `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *tokenCount `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// anthropicStreamState assembles a streamed answer from its events.
type anthropicStreamState struct {
	onDelta func(Delta)
	model   string
	text    strings.Builder
	calls   []ToolCall
	// callOf maps a content block's index to its tool call's ordinal:
	// OpenAI numbers tool calls, Anthropic numbers every block.
	callOf map[int]int
	finish string
	usage  anthropicUsage
	seen   bool   // some usage was reported
	final  *Usage // the usage of a whole answer
}

func (s *anthropicStreamState) emit(d Delta) {
	if s.onDelta != nil {
		s.onDelta(d)
	}
}

// event handles one event; done reports message_stop.
func (s *anthropicStreamState) event(data string) (done bool, err error) {
	var ev anthropicEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return false, malformed(http.StatusOK, err)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			s.model, s.usage, s.seen = ev.Message.Model, ev.Message.Usage, true
		}
	case "content_block_start":
		if ev.ContentBlock != nil && ev.ContentBlock.Type == "tool_use" {
			n := len(s.calls)
			s.callOf[ev.Index] = n
			s.calls = append(s.calls, ToolCall{ID: ev.ContentBlock.ID, Type: "function", Function: FunctionCall{Name: ev.ContentBlock.Name}})
			s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}})
		}
	case "content_block_delta":
		if ev.Delta == nil {
			break
		}
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				s.text.WriteString(ev.Delta.Text)
				s.emit(Delta{Content: ev.Delta.Text})
			}
		case "input_json_delta":
			n, ok := s.callOf[ev.Index]
			if !ok {
				return false, malformed(http.StatusOK, nil)
			}
			if ev.Delta.PartialJSON != "" {
				s.calls[n].Function.Arguments += ev.Delta.PartialJSON
				s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, Arguments: ev.Delta.PartialJSON}})
			}
		}
		// thinking_delta and signature_delta are the model's reasoning,
		// not its answer.
	case "content_block_stop":
		// A call without arguments streams none; its arguments are the
		// empty object, as in a whole answer.
		if n, ok := s.callOf[ev.Index]; ok && s.calls[n].Function.Arguments == "" {
			s.calls[n].Function.Arguments = "{}"
			s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, Arguments: "{}"}})
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.finish = ev.Delta.StopReason
		}
		if u := ev.Usage; u != nil {
			s.seen = true
			s.usage.OutputTokens = u.OutputTokens
			if u.InputTokens != nil {
				s.usage.InputTokens = *u.InputTokens
			}
			if u.CacheCreationInputTokens != nil {
				s.usage.CacheCreationInputTokens = *u.CacheCreationInputTokens
			}
			if u.CacheReadInputTokens != nil {
				s.usage.CacheReadInputTokens = *u.CacheReadInputTokens
			}
		}
	case "message_stop":
		return true, nil
	case "error":
		return false, ClassifyAnthropic(http.StatusInternalServerError, nil, []byte(data))
	}
	return false, nil
}

// whole takes a server that answered a whole message instead of a stream:
// its content and tool calls are relayed as deltas all at once.
func (s *anthropicStreamState) whole(status int, header http.Header, b []byte) error {
	r, err := parseMessage(status, header, b)
	if err != nil {
		return err
	}
	s.model = r.Model
	msg := r.Choices[0].Message
	if t := msg.Content.String(); t != "" {
		s.text.WriteString(t)
		s.emit(Delta{Content: t})
	}
	for n, tc := range msg.ToolCalls {
		s.calls = append(s.calls, tc)
		s.emit(Delta{ToolCall: &ToolCallDelta{Index: n, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	s.finish = r.Choices[0].FinishReason
	s.final = r.Usage
	return nil
}

// response is the assembled answer, returned with err when the stream
// failed (what arrived is in it), or with the *Error of an answer that
// holds nothing.
func (s *anthropicStreamState) response(status int, err error) (*Response, error) {
	text := s.text.String()
	msg := Message{Role: "assistant", ToolCalls: s.calls}
	if text != "" {
		msg.Content = Text(text)
	}
	out := &Response{Model: s.model, Status: status, Usage: s.final,
		Choices: []Choice{{Message: msg, FinishReason: anthropicFinish(s.finish)}}}
	if out.Usage == nil && s.seen {
		out.Usage = s.usage.usage()
	}
	if err != nil {
		return out, err
	}
	if _, err := anthropicAnswer(status, text, s.calls, s.finish); err != nil {
		return out, err
	}
	return out, nil
}

// Stream streams a Messages API answer: text_delta events become content
// deltas; a tool_use block's start becomes a tool-call delta with its id and
// name, and its input_json_delta fragments argument deltas, numbered by the
// tool call's ordinal; message_start and message_delta carry the usage,
// message_stop ends it. The Response is assembled as Complete's.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	body, err := c.body(req)
	if err != nil {
		return nil, err
	}
	s := &anthropicStreamState{onDelta: onDelta, callOf: map[int]int{}}
	status, err := sseCall{
		hc: c.hc, url: c.endpoint, header: c.headers(), payload: anthropicStreamRequest{messagesRequest: body, Stream: true},
		key: req.IdempotencyKey, classify: ClassifyAnthropic,
		onData: s.event,
		whole:  s.whole,
	}.do(ctx)
	return s.response(status, err)
}
