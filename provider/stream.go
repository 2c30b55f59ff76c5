package provider

import (
	"context"
	"encoding/json"
	"net/http"
)

// CodeStreamCut: a streamed answer stopped before its end. What arrived is
// in the partial Response returned with the error.
const CodeStreamCut = "stream_cut"

// Streamer is a Client that can also stream an answer as it is produced.
type Streamer interface {
	Client
	// Stream sends req once and calls onDelta with each piece of the
	// answer as it arrives: content, refusal and tool-call fragments, each
	// naming its choice. It returns the whole Response, assembled from
	// the pieces (usage included when the provider reports it), or a
	// *Error. When a stream is cut after content arrived, it returns both
	// the partial Response and a *Error of class ambiguous, code
	// stream_cut: the call ran, and may be billed.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error)
}

// maxEventBytes bounds one Server-Sent Event line.
const maxEventBytes = 1 << 20

// Stream streams a chat completion in the OpenAI chunk format, always
// asking for usage in the final chunk. It relays every choice's content,
// refusal and tool-call fragments as they come, and assembles them into
// the Response: per choice the content, the refusal, the tool calls with
// their argument fragments joined, the finish reason and the logprobs.
// Its failures are those of Complete, and stream_cut as Streamer says.
func (c *OpenAI) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	if c.nativeCall(req.Chat) {
		return c.streamResponses(ctx, req, onDelta)
	}
	body, err := openAIBody(req.Chat, true)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	asm := newStreamAssembly()
	out := &Response{}
	status, err := sseCall{
		hc: c.hc, url: c.endpoint, header: c.headers(), payload: body, key: req.IdempotencyKey, classify: ClassifyOpenAI,
		onData: func(data string) (bool, error) {
			if data == "[DONE]" {
				return true, nil
			}
			var ch streamChunk
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				return false, malformed(http.StatusOK, err)
			}
			if hasJSON(ch.Error) {
				return false, ClassifyOpenAI(http.StatusInternalServerError, nil, []byte(data))
			}
			if ch.Model != "" {
				out.Model = ch.Model
			}
			if ch.SystemFingerprint != "" {
				out.SystemFingerprint = ch.SystemFingerprint
			}
			if u := ch.Usage.usage(); u != nil {
				out.Usage = u
			}
			return false, asm.add(ch.Choices, onDelta)
		},
		whole: func(status int, header http.Header, b []byte) error {
			r, err := parseCompletion(status, header, b)
			if err == nil {
				*out = *r
				relayWhole(r, onDelta)
			}
			return err
		},
	}.do(ctx)
	return asm.finish(out, status, err)
}

// relayWhole relays a whole answer, from a server that ignored "stream",
// as the deltas a stream of it would have carried: its thinking first,
// then its text, refusal and tool calls.
func relayWhole(r *Response, onDelta func(Delta)) {
	for _, ch := range r.Choices {
		for _, p := range ch.Message.Content.Parts {
			switch p.Type {
			case PartThinking:
				onDelta(Delta{Choice: ch.Index, Thinking: p.Thinking})
				onDelta(Delta{Choice: ch.Index, Signature: p.Signature})
			case PartRedactedThinking:
				onDelta(Delta{Choice: ch.Index, RedactedThinking: p.Data})
			}
		}
		if s := ch.Message.Content.String(); s != "" {
			onDelta(Delta{Choice: ch.Index, Content: s})
		}
		if ch.Message.Refusal != "" {
			onDelta(Delta{Choice: ch.Index, Refusal: ch.Message.Refusal})
		}
		for i, tc := range ch.Message.ToolCalls {
			onDelta(Delta{Choice: ch.Index, ToolCall: &ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
}
