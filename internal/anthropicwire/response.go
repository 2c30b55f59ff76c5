package anthropicwire

import (
	"encoding/json"

	"github.com/tollgate/tollgate/internal/tokens"
)

// Response is the answer to POST /v1/messages: a Message. Usage is a
// pointer so that a reader can tell an answer without usage.
type Response struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []ResponseBlock `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *Usage          `json:"usage"`
}

// ResponseBlock is a content block of an answer: text, thinking,
// redacted_thinking or tool_use.
type ResponseBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage is an answer's token counts. input_tokens counts only the prompt
// tokens neither read from nor written to the cache, which are counted
// apart. In a message_delta event a count other than output_tokens is
// present only when it changed since message_start; a writer leaves a
// count nil to omit it.
type Usage struct {
	InputTokens              *tokens.Count `json:"input_tokens,omitempty"`
	OutputTokens             tokens.Count  `json:"output_tokens"`
	CacheCreationInputTokens *tokens.Count `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *tokens.Count `json:"cache_read_input_tokens,omitempty"`
}

// FullUsage is a Usage with all four counts written.
func FullUsage(input, output, cacheCreation, cacheRead int64) Usage {
	return Usage{InputTokens: count(input), OutputTokens: tokens.Count(output),
		CacheCreationInputTokens: count(cacheCreation), CacheReadInputTokens: count(cacheRead)}
}

func count(n int64) *tokens.Count {
	c := tokens.Count(n)
	return &c
}

// Counts are u's four counts, zero for one absent.
func (u Usage) Counts() (input, output, cacheCreation, cacheRead tokens.Count) {
	get := func(c *tokens.Count) tokens.Count {
		if c == nil {
			return 0
		}
		return *c
	}
	return get(u.InputTokens), u.OutputTokens, get(u.CacheCreationInputTokens), get(u.CacheReadInputTokens)
}
