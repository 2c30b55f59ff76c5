package fake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// chatRequest is an OpenAI chat completions request. Every field OpenAI
// defines that changes the fake's answer is read; the sampling parameters
// are decoded only to refuse values of the wrong type, and fields it does
// not know are accepted, as passthrough fields must be.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools             []chatTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	N           *int `json:"n"`
	Logprobs    bool `json:"logprobs"`
	TopLogprobs *int `json:"top_logprobs"`

	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	Seed             *int64             `json:"seed"`
	Stop             stopField          `json:"stop"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	User             string             `json:"user"`
	SafetyIdentifier string             `json:"safety_identifier"`
	ReasoningEffort  string             `json:"reasoning_effort"`
	Verbosity        string             `json:"verbosity"`
	Metadata         map[string]string  `json:"metadata"`
}

// stopField is a stop sequence or a list of them.
type stopField []string

func (s *stopField) UnmarshalJSON(data []byte) error {
	var one string
	if json.Unmarshal(data, &one) == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

type chatMessage struct {
	Role      string      `json:"role"`
	Content   chatContent `json:"content"`
	Name      string      `json:"name"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string  `json:"tool_call_id"`
	Refusal    *string `json:"refusal"`
}

// chatContent is OpenAI message content: null, a string, or an array of
// text and image_url parts.
type chatContent struct {
	text   string
	images []image
}

func (c *chatContent) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			switch {
			case p.Type == "text":
				sb.WriteString(p.Text)
			case p.Type == "image_url" && p.ImageURL != nil && p.ImageURL.URL != "":
				c.images = append(c.images, image{URL: p.ImageURL.URL, Detail: p.ImageURL.Detail})
			default:
				return fmt.Errorf("invalid content part of type %q", p.Type)
			}
		}
		c.text = sb.String()
		return nil
	}
	if err := json.Unmarshal(data, &c.text); err != nil {
		return errors.New("content must be a string, null or an array of content parts")
	}
	return nil
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// handleChat serves POST /v1/chat/completions in the OpenAI format,
// streaming Server-Sent Events when the request asks for it.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body := readBody(w, r)
	var req chatRequest
	err := decodeObject(body, &req)
	next, ok := s.receiveOpenAI(w, r, body, req.Model, req.Stream, err)
	if !ok {
		return
	}
	a, rerr := s.chatAsk(req)
	if rerr != nil {
		writeOpenAIError(w, http.StatusBadRequest, *rerr)
		return
	}
	rp := plan(a, next, "call_fake_")
	if req.Stream {
		s.streamChat(w, r, req, rp)
		return
	}
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), completionOf(req.Model, s.now().Unix(), rp))
}

// chatAsk reduces req, refusing what OpenAI itself refuses among the
// mistakes a gateway can make.
func (s *Server) chatAsk(req chatRequest) (ask, *requestError) {
	a := ask{reasoning: s.reasoning[req.Model], parallel: true, n: 1, logprobs: req.Logprobs}
	for _, step := range []func(*ask, chatRequest) *requestError{
		(*ask).chatLimits, (*ask).chatTools, (*ask).chatFormat, (*ask).chatTurns,
	} {
		if err := step(&a, req); err != nil {
			return a, err
		}
	}
	return a, nil
}

// chatLimits reads the output limit, n, top_logprobs and
// parallel_tool_calls; a reasoning model refuses max_tokens.
func (a *ask) chatLimits(req chatRequest) *requestError {
	if a.reasoning && req.MaxTokens != nil {
		return &requestError{
			msg:   "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
			param: "max_tokens", code: "unsupported_parameter",
		}
	}
	switch {
	case req.MaxTokens != nil && *req.MaxTokens > 0:
		a.limit = *req.MaxTokens
	case req.MaxCompletionTokens != nil:
		a.limit = *req.MaxCompletionTokens
	}
	if req.N != nil {
		if *req.N < 1 || *req.N > 128 {
			return &requestError{msg: fmt.Sprintf("Invalid 'n': integer must be between 1 and 128, got %d.", *req.N), param: "n", code: "integer_out_of_range"}
		}
		a.n = *req.N
	}
	if req.TopLogprobs != nil {
		a.topLogprobs = *req.TopLogprobs
	}
	if req.ParallelToolCalls != nil {
		a.parallel = *req.ParallelToolCalls
	}
	return nil
}

// chatTools reads the function tools and the tool choice, which needs
// tools.
func (a *ask) chatTools(req chatRequest) *requestError {
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return &requestError{msg: fmt.Sprintf("Invalid value for 'tools[%d]': a function tool with a name is required.", i), param: fmt.Sprintf("tools[%d]", i)}
		}
		def, _ := json.Marshal(t)
		a.tools = append(a.tools, tool{Name: t.Function.Name, Schema: t.Function.Parameters, size: len(def)})
	}
	if len(req.ToolChoice) == 0 || bytes.Equal(req.ToolChoice, []byte("null")) {
		return nil
	}
	if len(req.Tools) == 0 {
		return &requestError{msg: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", param: "tool_choice"}
	}
	var mode string
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case json.Unmarshal(req.ToolChoice, &mode) == nil:
		a.toolChoice = mode
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Function.Name != "":
		a.toolChoice = named.Function.Name
	}
	return nil
}

// chatFormat reads the response format; json_schema needs its schema.
func (a *ask) chatFormat(req chatRequest) *requestError {
	f := req.ResponseFormat
	if f == nil {
		return nil
	}
	a.format = f.Type
	if f.Type == "json_schema" {
		if f.JSONSchema == nil {
			return &requestError{msg: "Missing required parameter: 'response_format.json_schema'.", param: "response_format.json_schema", code: "missing_required_parameter"}
		}
		a.schema = f.JSONSchema.Schema
	}
	return nil
}

// chatTurns reduces the messages to turns; a tool message must answer a
// call of the assistant message before it.
func (a *ask) chatTurns(req chatRequest) *requestError {
	pending := map[string]bool{}
	for i, m := range req.Messages {
		t := turn{Role: m.Role, Content: m.Content.text, Name: m.Name, Images: m.Content.images, ToolCallID: m.ToolCallID}
		if m.Refusal != nil {
			t.Refusal = *m.Refusal
		}
		if m.Role != "tool" {
			clear(pending)
		}
		for _, c := range m.ToolCalls {
			t.ToolCalls = append(t.ToolCalls, toolCall{ID: c.ID, Name: c.Function.Name, Arguments: compactJSON([]byte(c.Function.Arguments))})
			pending[c.ID] = true
		}
		if m.Role == "tool" && !pending[m.ToolCallID] {
			return &requestError{
				msg:   "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
				param: fmt.Sprintf("messages.[%d].role", i),
			}
		}
		a.turns = append(a.turns, t)
	}
	a.afterToolResult = len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "tool"
	return nil
}

type completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             usage    `json:"usage"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      chatAnswer   `json:"message"`
	Logprobs     *logprobList `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

// chatAnswer is the assistant message; content is null beside tool calls
// or a refusal, as OpenAI sends it.
type chatAnswer struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   string         `json:"refusal,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"` // streamed deltas only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

// usageOf counts in OpenAI's terms: cached tokens are part of the prompt,
// reasoning tokens part of the completion, every choice billed; the details
// appear when either class is not zero.
func usageOf(rp reply) usage {
	u := usage{PromptTokens: rp.prompt + rp.cached, CompletionTokens: rp.out * rp.n}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if rp.cached > 0 || rp.reasoning > 0 {
		u.PromptTokensDetails = &struct {
			CachedTokens int `json:"cached_tokens"`
		}{rp.cached}
		u.CompletionTokensDetails = &struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		}{rp.reasoning * rp.n}
	}
	return u
}

type logprobList struct {
	Content []logprob `json:"content"`
	Refusal []logprob `json:"refusal"`
}

type logprob struct {
	Token       string     `json:"token"`
	Logprob     float64    `json:"logprob"`
	Bytes       []int      `json:"bytes"`
	TopLogprobs []logprob2 `json:"top_logprobs"`
}

type logprob2 struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// words splits text the way the fake streams it: a word and its trailing
// space at a time.
func words(text string) []string {
	if text == "" {
		return nil
	}
	return strings.SplitAfter(text, " ")
}

// logprobsOf gives each word of text logprob -0.25, and as top logprobs the
// word itself then "alt1", "alt2"... at -1, -2...
func logprobsOf(text string, top int) []logprob {
	out := []logprob{}
	for _, wd := range words(text) {
		lp := logprob{Token: wd, Logprob: -0.25, Bytes: bytesOf(wd), TopLogprobs: []logprob2{}}
		for j := range top {
			alt := logprob2{Token: wd, Logprob: -0.25, Bytes: bytesOf(wd)}
			if j > 0 {
				tok := fmt.Sprintf("alt%d", j)
				alt = logprob2{Token: tok, Logprob: -float64(j), Bytes: bytesOf(tok)}
			}
			lp.TopLogprobs = append(lp.TopLogprobs, alt)
		}
		out = append(out, lp)
	}
	return out
}

func bytesOf(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// completionOf writes rp as a chat completion, n identical choices.
func completionOf(model string, created int64, rp reply) completion {
	c := completion{
		ID: "chatcmpl-fake-" + rp.digest[:24], Object: "chat.completion", Created: created, Model: cmp.Or(rp.model, model),
		Usage: usageOf(rp), SystemFingerprint: rp.sc.SystemFingerprint,
	}
	for i := range rp.n {
		m := chatAnswer{Role: "assistant", Refusal: rp.refusal}
		if rp.refusal == "" && rp.calls == nil {
			text := rp.content
			m.Content = &text
		}
		for _, tc := range rp.calls {
			var call chatToolCall
			call.ID, call.Type, call.Function.Name, call.Function.Arguments = tc.ID, "function", tc.Name, tc.Arguments
			m.ToolCalls = append(m.ToolCalls, call)
		}
		ch := choice{Index: i, Message: m, FinishReason: rp.finish}
		if rp.logprobs {
			ch.Logprobs = &logprobList{Content: logprobsOf(rp.content, rp.topLogprob)}
			if rp.refusal != "" {
				ch.Logprobs = &logprobList{Refusal: logprobsOf(rp.refusal, rp.topLogprob)}
			}
		}
		c.Choices = append(c.Choices, ch)
	}
	return c
}
