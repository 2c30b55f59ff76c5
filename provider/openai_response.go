package provider

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// chatCompletion is OpenAI's answer, read leniently: compatible servers
// differ in what they omit.
type chatCompletion struct {
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []wireChoice    `json:"choices"`
	Usage             *openAIUsage    `json:"usage"`
	Error             json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index   *int `json:"index"`
	Message struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Refusal   *string         `json:"refusal"`
		ToolCalls []wireToolCall  `json:"tool_calls"`
	} `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string        `json:"name"`
		Arguments argumentsText `json:"arguments"`
	} `json:"function"`
}

// argumentsText is a tool call's arguments: OpenAI sends the JSON text the
// model produced as a string, kept byte for byte; some compatible servers
// send the object itself, which becomes its compact JSON text.
type argumentsText string

// UnmarshalJSON reads a string, null, or any other JSON value as its
// compact text.
func (a *argumentsText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*a = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = argumentsText(s)
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*a = argumentsText(buf.String())
	return nil
}

// parseCompletion turns a 2xx body into a Response with every choice, or
// into a *Error when it holds no usable completion: malformed_response for
// a body of the wrong shape, empty_output when no choice holds content, a
// tool call or a refusal, content_policy when the provider's filter
// withheld them.
func parseCompletion(status int, header http.Header, body []byte) (*Response, error) {
	var cc chatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return nil, malformed(status, err)
	}
	if len(cc.Choices) == 0 {
		if hasJSON(cc.Error) {
			// Some compatible servers and proxies report failures as 200
			// with an error body; it classifies like any other.
			return nil, ClassifyOpenAI(status, header, body)
		}
		return nil, malformed(status, nil)
	}
	r := &Response{Model: cc.Model, SystemFingerprint: cc.SystemFingerprint, Usage: cc.Usage.usage(), Status: status}
	filtered := false
	for i, wc := range cc.Choices {
		content, ok := contentText(wc.Message.Content)
		if !ok {
			return nil, malformed(status, nil)
		}
		ch := Choice{Index: i, FinishReason: wc.FinishReason, Message: Message{Role: "assistant", Content: Text(content)}}
		if wc.Index != nil {
			ch.Index = *wc.Index
		}
		if wc.Message.Refusal != nil {
			ch.Message.Refusal = *wc.Message.Refusal
		}
		for _, tc := range wc.Message.ToolCalls {
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, ToolCall{ID: tc.ID, Type: typ,
				Function: FunctionCall{Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)}})
		}
		if hasJSON(wc.Logprobs) {
			ch.Logprobs = compactJSON(wc.Logprobs)
		}
		filtered = filtered || wc.FinishReason == "content_filter"
		r.Choices = append(r.Choices, ch)
	}
	slices.SortStableFunc(r.Choices, func(a, b Choice) int { return cmp.Compare(a.Index, b.Index) })
	if !answered(r.Choices) {
		if filtered {
			return nil, &Error{Class: ClassRejected, Status: status, Code: CodeContentPolicy}
		}
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	return r, nil
}

// answered reports whether any choice holds an answer: text that is not
// blank, a tool call or a refusal.
func answered(choices []Choice) bool {
	for _, c := range choices {
		if strings.TrimSpace(c.Message.Content.String()) != "" || len(c.Message.ToolCalls) > 0 || c.Message.Refusal != "" {
			return true
		}
	}
	return false
}

// compactJSON is raw without insignificant space; raw as is if it is not
// valid JSON, which the decoder that produced it has ruled out.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// contentText reads message.content, which is a string, null, or (on some
// compatible servers) an array of {"type": "text", "text": ...} parts. It
// reports false for any other shape.
func contentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}
