package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// CodeStreamCut: a streamed answer stopped before its end. What arrived is
// in the partial Response returned with the error.
const CodeStreamCut = "stream_cut"

// Streamer is a Client that can also stream an answer as it is produced.
type Streamer interface {
	Client
	// Stream sends req once and calls onDelta with each piece of content as
	// it arrives. It returns the whole Response (usage included when the
	// provider reports it) or a *Error. When a stream is cut after content
	// arrived, it returns both the partial Response and a *Error of class
	// ambiguous, code stream_cut: the call ran, and may be billed.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error)
}

type streamRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	MaxTokens     int       `json:"max_tokens,omitempty"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type streamChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     tokenCount `json:"prompt_tokens"`
		CompletionTokens tokenCount `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// maxEventBytes bounds one Server-Sent Event line.
const maxEventBytes = 1 << 20

// Stream streams a chat completion in the OpenAI chunk format, always
// asking for usage in the final chunk.
func (c *OpenAI) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	body := streamRequest{Model: req.Model, Messages: msgs, MaxTokens: req.OutputLimit(), Stream: true}
	body.StreamOptions.IncludeUsage = true
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	out := &Response{}
	var text strings.Builder
	var finish string
	status, err := sseCall{
		hc: c.hc, url: c.endpoint, header: h, payload: body, key: req.IdempotencyKey, classify: ClassifyOpenAI,
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
			for _, choice := range ch.Choices {
				if choice.Delta.Content != "" {
					text.WriteString(choice.Delta.Content)
					if onDelta != nil {
						onDelta(Delta{Content: choice.Delta.Content})
					}
				}
				if choice.FinishReason != nil {
					finish = *choice.FinishReason
				}
			}
			if ch.Usage != nil {
				out.Usage = &Usage{InputTokens: int64(ch.Usage.PromptTokens), OutputTokens: int64(ch.Usage.CompletionTokens)}
			}
			return false, nil
		},
		whole: func(status int, header http.Header, b []byte) error {
			r, err := parseCompletion(status, header, b)
			if err == nil {
				*out = *r
				text.WriteString(r.Text())
				finish = r.FinishReason()
				if onDelta != nil {
					onDelta(Delta{Content: r.Text()})
				}
			}
			return err
		},
	}.do(ctx)
	out.Status = status
	content := text.String()
	out.Choices = TextResponse(content, finish).Choices
	if err != nil {
		return out, err
	}
	if content == "" {
		return out, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput, cause: errors.New("empty stream")}
	}
	return out, nil
}
