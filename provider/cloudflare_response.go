package provider

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

type workersAIResponse struct {
	Result  json.RawMessage   `json:"result"`
	Success *bool             `json:"success"`
	Errors  []json.RawMessage `json:"errors"`
}

type workersAIResult struct {
	// Response is a string, or a JSON object in JSON mode; null or absent
	// when the model only called tools.
	Response  json.RawMessage     `json:"response"`
	ToolCalls []workersAIToolCall `json:"tool_calls"`
	Usage     *openAIUsage        `json:"usage"`
	// Choices: some newer models answer in the OpenAI shape inside result.
	Choices json.RawMessage `json:"choices"`
}

// workersAIToolCall is a call as Workers AI reports it: {name, arguments}
// with the arguments as an object, or, on some models, OpenAI's {id, type,
// function: {name, arguments}}.
type workersAIToolCall struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	Arguments argumentsText `json:"arguments"`
	Function  *struct {
		Name      string        `json:"name"`
		Arguments argumentsText `json:"arguments"`
	} `json:"function"`
}

// parseWorkersAI turns a 2xx envelope into a one-choice Response, or into
// a *Error when it reports a failure or holds no usable output. Workers AI
// reports neither the model nor a finish reason: the model stays empty,
// and the finish reason is "tool_calls" when the model called tools, else
// empty. Tool calls get their arguments as JSON text, and the id
// "call_<n>" (n their position) when the model gave none.
func parseWorkersAI(status int, header http.Header, body []byte) (*Response, error) {
	var env workersAIResponse
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, malformed(status, err)
	}
	if (env.Success != nil && !*env.Success) || len(env.Errors) > 0 {
		return nil, ClassifyCloudflare(status, header, body)
	}
	if !isJSONObject(env.Result) {
		return nil, malformed(status, nil)
	}
	var res workersAIResult
	if err := json.Unmarshal(env.Result, &res); err != nil {
		return nil, malformed(status, err)
	}
	if !hasJSON(res.Response) && len(res.ToolCalls) == 0 && hasJSON(res.Choices) {
		return parseCompletion(status, header, env.Result)
	}
	content, ok := workersAIText(res.Response)
	if !ok {
		return nil, malformed(status, nil)
	}
	msg := Message{Role: "assistant", Content: Text(content)}
	for i, tc := range res.ToolCalls {
		name, args := tc.Name, tc.Arguments
		if tc.Function != nil {
			name, args = tc.Function.Name, tc.Function.Arguments
		}
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(i)
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: string(args)}})
	}
	if strings.TrimSpace(content) == "" && len(msg.ToolCalls) == 0 {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	// Workers AI reports no finish reason: a text answer is a stop, as
	// OpenAI's would be, and an answer with calls is tool_calls.
	finish := "stop"
	if len(msg.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	return &Response{Choices: []Choice{{Message: msg, FinishReason: finish}}, Usage: res.Usage.usage(), Status: status}, nil
}

// workersAIText reads result.response: a string as is, an object or array
// (JSON mode) re-encoded as compact JSON text, null or absent as "". It
// reports false for any other shape.
func workersAIText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if !hasJSON(raw) {
		return "", true
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	case '{', '[':
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return "", false
		}
		return b.String(), true
	}
	return "", false
}
