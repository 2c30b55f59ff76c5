package fake

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// turn is one message of a conversation in the form every endpoint reduces
// to; its JSON encoding is what the conversation digest hashes. A plain text
// message encodes as {"role","content"} alone.
type turn struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"` // text parts and blocks joined
	Name       string     `json:"name,omitempty"`
	Images     []image    `json:"images,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Refusal    string     `json:"refusal,omitempty"`
}

// image is an image part: its URL, a data URL for inline bytes (Anthropic's
// base64 sources included, so that the same image hashes the same in both
// formats).
type image struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text, compacted when valid
}

// tool is a function the model may call.
type tool struct {
	Name   string
	Schema json.RawMessage
	size   int // bytes of its definition, for the prompt count
}

// ask is a model call reduced to what decides the fake's answer.
type ask struct {
	turns           []turn
	afterToolResult bool // the last message carries a tool result
	tools           []tool
	toolChoice      string // "", auto, none, required, or the name of a forced tool
	parallel        bool
	format          string // "", text, json_object, json_schema
	schema          json.RawMessage
	limit           int
	n               int
	logprobs        bool
	topLogprobs     int
	reasoning       bool // a model given to WithReasoningModels
	thinking        bool // Anthropic extended thinking
}

// reply is the fake's answer, decided before it is written in a format.
type reply struct {
	digest     string
	content    string // text, or the JSON document when structured
	structured bool
	calls      []toolCall
	refusal    string
	thinking   string // a thinking block's text, "" for none
	signature  string
	redacted   string // a redacted_thinking block's data, "" for none
	sequence   string // the stop sequence that ended the answer
	finish     string // OpenAI's terms: stop, length, tool_calls, content_filter
	model      string // the answer's model, "" for the request's
	prompt     int    // uncached input tokens
	cached     int
	cacheWrite int
	out        int // output tokens per choice, reasoning included
	reasoning  int
	n          int
	logprobs   bool
	topLogprob int
	sc         Scripted
}

// digestOf is the hex SHA-256 of the conversation's JSON encoding.
func digestOf(turns []turn) string {
	if turns == nil {
		turns = []turn{}
	}
	canonical, _ := json.Marshal(turns) // cannot fail: strings only
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// imageTokens is what one image adds to the prompt count.
const imageTokens = 85

// promptTokens counts ceil(len/4)+4 per message, its tool calls' names and
// arguments as text, imageTokens per image, and ceil(len/4) per tool
// definition.
func promptTokens(a ask) int {
	n := 0
	for _, t := range a.turns {
		chars := len(t.Content)
		for _, c := range t.ToolCalls {
			chars += len(c.Name) + len(c.Arguments)
		}
		n += (chars+3)/4 + 4 + imageTokens*len(t.Images)
	}
	for _, t := range a.tools {
		n += (t.size + 3) / 4
	}
	return n
}

// plan decides the answer to a, shaped by sc; idPrefix starts the tool call
// ids of the format ("call_fake_", "toolu_fake_").
func plan(a ask, sc Scripted, idPrefix string) reply {
	digest := digestOf(a.turns)
	out := a.limit
	if out <= 0 || out > 16 {
		out = 16
	}
	rp := reply{
		digest: digest, prompt: promptTokens(a), cached: sc.CachedTokens, cacheWrite: sc.CacheWriteTokens,
		out: out, n: max(a.n, 1), logprobs: a.logprobs || sc.Logprobs, topLogprob: a.topLogprobs, sc: sc,
	}
	switch {
	case sc.ReasoningTokens > 0:
		rp.reasoning = sc.ReasoningTokens
		rp.out += sc.ReasoningTokens
	case a.reasoning:
		rp.reasoning = out / 2
	}
	if a.thinking {
		rp.thinking = "fake thinking " + digest[:12]
	}
	if sc.Thinking != "" {
		rp.thinking = sc.Thinking
	}
	if rp.thinking != "" {
		rp.signature = cmp.Or(sc.Signature, thinkingSignature(rp.thinking))
	}
	rp.redacted, rp.sequence = sc.RedactedThinking, sc.StopSequence
	switch {
	case sc.Refusal != "":
		rp.refusal = sc.Refusal
		rp.finish = "stop"
	case wantsTools(a, sc):
		rp.calls = toolCalls(a, sc, idPrefix)
		rp.finish = "tool_calls"
	default:
		rp.finish = "stop"
		switch {
		case sc.Content != "":
			rp.content = sc.Content
		case a.format == "json_schema":
			rp.content, rp.structured = string(instanceOf(a.schema)), true
		case a.format == "json_object":
			rp.content, rp.structured = `{"completion":"fake completion `+digest[:12]+`"}`, true
		default:
			rp.content = "fake completion " + digest[:12]
		}
	}
	if sc.FinishReason != "" {
		rp.finish = sc.FinishReason
	}
	rp.model = sc.Model
	return rp
}

// thinkingSignature is how the fake signs its thinking: a digest of the
// text, so that a thinking block passed back altered is found out, as
// Anthropic finds it out.
func thinkingSignature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return signaturePrefix + hex.EncodeToString(sum[:8])
}

// signaturePrefix begins every signature the fake makes itself.
const signaturePrefix = "fake-signature-"

// wantsTools decides between a tool call and text: tools offered and not
// refused, unless the conversation just got a tool result, answer with a
// call; the script overrides both ways.
func wantsTools(a ask, sc Scripted) bool {
	switch {
	case sc.Text:
		return false
	case sc.Tool != "":
		return true
	case len(a.tools) == 0:
		return false
	case sc.ToolCalls > 0:
		return true
	}
	return a.toolChoice != "none" && !a.afterToolResult
}

// toolCalls builds the calls, numbered after the calls already in the
// conversation so that ids stay unique over a tool loop.
func toolCalls(a ask, sc Scripted, idPrefix string) []toolCall {
	count := max(sc.ToolCalls, 1)
	if !a.parallel {
		count = 1
	}
	prior := 0
	for _, t := range a.turns {
		prior += len(t.ToolCalls)
	}
	forced := sc.Tool
	if forced == "" && a.toolChoice != "" && a.toolChoice != "auto" && a.toolChoice != "none" && a.toolChoice != "required" {
		forced = a.toolChoice
	}
	calls := make([]toolCall, count)
	for i := range calls {
		var t tool
		if forced != "" {
			t = tool{Name: forced}
			for _, x := range a.tools {
				if x.Name == forced {
					t = x
					break
				}
			}
		} else {
			t = a.tools[i%len(a.tools)]
		}
		calls[i] = toolCall{ID: idPrefix + strconv.Itoa(prior+i+1), Name: t.Name, Arguments: string(instanceOf(t.Schema))}
	}
	return calls
}

// compactJSON returns s compacted when it is JSON, else s unchanged.
func compactJSON(s []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, s) != nil {
		return string(s)
	}
	return b.String()
}

// fragments splits s into pieces of about size bytes, on rune boundaries,
// the way a provider streams tool arguments.
func fragments(s string, size int) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > size {
		cut := size
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = size
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// argFragment is the size of a streamed tool-argument fragment.
const argFragment = 8
