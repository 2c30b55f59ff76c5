package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How an OpenAI chat completions request becomes a task request.

type oaiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// oaiRequest holds the fields Tollgate acts on. Other valid OpenAI fields
// (temperature, top_p, seed, stop, response_format, tools, ...) are
// accepted and ignored, as the README documents.
type oaiRequest struct {
	Model               string       `json:"model"`
	Messages            []oaiMessage `json:"messages"`
	MaxTokens           *int         `json:"max_tokens"`
	MaxCompletionTokens *int         `json:"max_completion_tokens"`
	N                   *int         `json:"n"`
	Stream              bool         `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Metadata map[string]any `json:"metadata"`
	User     string         `json:"user"`
}

// text turns OpenAI content (a string, or an array of parts) into text;
// only text parts are supported. path names the content in errors.
func (m oaiMessage) text(path string) (string, error) {
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := decodeBytes(m.Content, &parts, scanLenient, path); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && len(ae.fields) > 0 && ae.fields[0].Field != path {
			return "", err
		}
		return "", badRequest("A message content is not supported.",
			tasks.FieldError{Field: path, Message: "content must be a string or an array of text parts"})
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest("A message content is not supported.",
				tasks.FieldError{Field: fmt.Sprintf("%s[%d].type", path, j), Message: fmt.Sprintf("content parts of type %q are not supported", clipText(p.Type, 64))})
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (r oaiRequest) task() (tasks.Request, error) {
	out := tasks.Request{Metadata: r.Metadata}
	out.Model = r.Model
	if r.N != nil && *r.N != 1 {
		return out, badRequest("Only n = 1 is supported.", tasks.FieldError{Field: "n", Message: "must be 1"})
	}
	switch {
	case r.MaxCompletionTokens != nil:
		out.MaxTokens = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		out.MaxTokens = *r.MaxTokens
	}
	for i, m := range r.Messages {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		text, err := m.text(fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return out, err
		}
		out.Messages = append(out.Messages, provider.Message{Role: role, Content: provider.Text(text)})
	}
	return out, nil
}
