package anthropicwire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Request is the body of POST /v1/messages. MaxTokens is a pointer so
// that a reader can tell max_tokens missing from max_tokens 0; Stream is
// written last, and only when true.
type Request struct {
	Model         string        `json:"model"`
	MaxTokens     *int          `json:"max_tokens"`
	System        *Content      `json:"system,omitempty"`
	Messages      []Message     `json:"messages"`
	Tools         []Tool        `json:"tools,omitempty"`
	ToolChoice    *ToolChoice   `json:"tool_choice,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	TopK          *int          `json:"top_k,omitempty"`
	Thinking      *Thinking     `json:"thinking,omitempty"`
	OutputConfig  *OutputConfig `json:"output_config,omitempty"`
	OutputFormat  *OutputFormat `json:"output_format,omitempty"` // output_config.format's older name
	Metadata      *Metadata     `json:"metadata,omitempty"`
	CacheControl  *CacheControl `json:"cache_control,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
}

// CountTokensRequest is the body of POST /v1/messages/count_tokens: the
// prompt of a Request, without its output settings.
type CountTokensRequest struct {
	Model        string        `json:"model"`
	Messages     []Message     `json:"messages"`
	System       *Content      `json:"system,omitempty"`
	Tools        []Tool        `json:"tools,omitempty"`
	ToolChoice   *ToolChoice   `json:"tool_choice,omitempty"`
	Thinking     *Thinking     `json:"thinking,omitempty"`
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// Message is one message of a request: user or assistant.
type Message struct {
	Role    string   `json:"role"`
	Content *Content `json:"content"`
}

// Content is a message's content, a system prompt or a tool result's
// content: a string or an array of blocks. Text is set for a string, so
// that content read as a string is written as one.
type Content struct {
	Text   *string
	Blocks []Block
}

// TextContent is s as content written as a string.
func TextContent(s string) *Content { return &Content{Text: &s} }

// BlockContent is blocks as content written as an array.
func BlockContent(blocks []Block) *Content { return &Content{Blocks: blocks} }

var errContent = errors.New("content must be a string or an array of content blocks")

// UnmarshalJSON reads a string or an array of blocks (an empty array as
// no blocks, not nil); anything else is an error.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var blocks []Block
		if err := json.Unmarshal(b, &blocks); err != nil {
			return err
		}
		if blocks == nil {
			blocks = []Block{}
		}
		*c = Content{Blocks: blocks}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errContent
	}
	*c = Content{Text: &s}
	return nil
}

// MarshalJSON writes the string, or the blocks (an empty array for none).
// HTML characters are left to the encoder that writes the whole body.
func (c Content) MarshalJSON() ([]byte, error) {
	var v any = c.Blocks
	switch {
	case c.Text != nil:
		v = *c.Text
	case c.Blocks == nil:
		v = []Block{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Block is a content block of a request: text, image, tool_use,
// tool_result, thinking, redacted_thinking, or any other type a reader
// refuses by name. Which fields belong to which type is the reader's to
// check.
type Block struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text,omitempty"`
	Source       *ImageSource    `json:"source,omitempty"`
	ID           *string         `json:"id,omitempty"`
	Name         *string         `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    *string         `json:"tool_use_id,omitempty"`
	Content      *Content        `json:"content,omitempty"` // a tool_result's
	IsError      *bool           `json:"is_error,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    *string         `json:"signature,omitempty"`
	Data         *string         `json:"data,omitempty"` // a redacted_thinking block's
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// ImageSource is an image block's source: base64 (media_type and data),
// url, or file (Anthropic's Files API).
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileID    string `json:"file_id,omitempty"`
}

// ImageTypes are the media types the Messages API takes for a base64
// image.
var ImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// Tool is a tool definition. Type is absent or "custom" for a client
// tool; Anthropic's server tools have their own types.
type Tool struct {
	Type         *string         `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Strict       *bool           `json:"strict,omitempty"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// ToolChoice is tool_choice: auto, any, tool (with its name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Thinking is extended thinking: enabled with a token budget, adaptive,
// or disabled; display says how thinking is shown.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// Asks reports whether t asks for thinking (enabled or adaptive).
func (t *Thinking) Asks() bool {
	return t != nil && t.Type != "" && t.Type != "disabled"
}

// CacheControl is a prompt-cache breakpoint on a block, a tool or the
// whole request: type ephemeral, with an optional ttl.
type CacheControl struct {
	Type string `json:"type"` // ephemeral
	TTL  string `json:"ttl,omitempty"`
}

// OutputConfig is output_config: the structured output format, and the
// effort.
type OutputConfig struct {
	Format *OutputFormat `json:"format,omitempty"`
	Effort string        `json:"effort,omitempty"`
}

// OutputFormat is a structured output format: json_schema with its
// schema.
type OutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// Metadata is a request's metadata: the end user's opaque identifier.
type Metadata struct {
	UserID string `json:"user_id"`
}
