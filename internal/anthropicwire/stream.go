package anthropicwire

import "encoding/json"

// The events of a Messages stream: message_start, ping, then each
// content block as content_block_start, its content_block_delta events
// and content_block_stop, then message_delta (stop reason and usage) and
// message_stop; error when a stream that has begun fails. The writers'
// types are one per event; Event reads any of them.

// Event types.
const (
	EventMessageStart      = "message_start"
	EventPing              = "ping"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventError             = "error"
)

// Event is any event of a stream, as a reader takes it: the fields of
// every event type in one struct. Of message_start's message it reads
// the model and the usage, which is all a stream's start says.
type Event struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Model string `json:"model"`
		Usage Usage  `json:"usage"`
	} `json:"message"`
	ContentBlock *StreamBlock    `json:"content_block"`
	Delta        *EventDelta     `json:"delta"`
	Usage        *Usage          `json:"usage"`
	Error        json.RawMessage `json:"error"`
}

// EventDelta is the delta of a content_block_delta or a message_delta
// event, as a reader takes it.
type EventDelta struct {
	BlockDelta
	StopDelta
}

// TypeOnly is an event that has nothing but its type: ping, message_stop.
type TypeOnly struct {
	Type string `json:"type"`
}

// MessageStart is the message_start event.
type MessageStart struct {
	Message StreamMessage `json:"message"`
	Type    string        `json:"type"`
}

// StreamMessage is the message a message_start event opens: no content
// yet, no stop reason, the usage so far.
type StreamMessage struct {
	Content      []ResponseBlock `json:"content"`
	ID           string          `json:"id"`
	Model        string          `json:"model"`
	Role         string          `json:"role"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Type         string          `json:"type"`
	Usage        Usage           `json:"usage"`
}

// ContentBlockStart is the content_block_start event.
type ContentBlockStart struct {
	ContentBlock StreamBlock `json:"content_block"`
	Index        int         `json:"index"`
	Type         string      `json:"type"`
}

// StreamBlock is a content block as content_block_start opens it: its
// text, thinking or input follow as deltas.
type StreamBlock struct {
	Data      *string         `json:"data,omitempty"`
	ID        *string         `json:"id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Name      *string         `json:"name,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Type      string          `json:"type"`
}

// ContentBlockDelta is the content_block_delta event.
type ContentBlockDelta struct {
	Delta BlockDelta `json:"delta"`
	Index int        `json:"index"`
	Type  string     `json:"type"`
}

// BlockDelta is a content block's delta: text_delta, thinking_delta,
// signature_delta or input_json_delta, each with its one field.
type BlockDelta struct {
	PartialJSON *string `json:"partial_json,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Type        string  `json:"type"`
}

// TextDelta is a text_delta of s.
func TextDelta(s string) BlockDelta { return BlockDelta{Type: "text_delta", Text: &s} }

// ThinkingDelta is a thinking_delta of s.
func ThinkingDelta(s string) BlockDelta { return BlockDelta{Type: "thinking_delta", Thinking: &s} }

// SignatureDelta is a signature_delta of s.
func SignatureDelta(s string) BlockDelta { return BlockDelta{Type: "signature_delta", Signature: &s} }

// InputJSONDelta is an input_json_delta of s, a fragment of a tool_use
// block's input.
func InputJSONDelta(s string) BlockDelta {
	return BlockDelta{Type: "input_json_delta", PartialJSON: &s}
}

// ContentBlockStop is the content_block_stop event.
type ContentBlockStop struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
}

// MessageDelta is the message_delta event.
type MessageDelta struct {
	Delta StopDelta `json:"delta"`
	Type  string    `json:"type"`
	Usage Usage     `json:"usage"`
}

// StopDelta is a message_delta event's delta: why the answer stopped.
type StopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}
