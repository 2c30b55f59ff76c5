package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
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
	Stream(ctx context.Context, req Request, onDelta func(string)) (*Response, error)
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
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// maxEventBytes bounds one Server-Sent Event line.
const maxEventBytes = 1 << 20

// Stream streams a chat completion in the OpenAI chunk format, always
// asking for usage in the final chunk.
func (c *OpenAI) Stream(ctx context.Context, req Request, onDelta func(string)) (*Response, error) {
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	body := streamRequest{Model: req.Model, Messages: msgs, MaxTokens: req.MaxTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			sent.Store(true)
		}
	}}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, rejectedLocally(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, transportError(ctx.Err(), err, sent.Load(), 0)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		return nil, ClassifyOpenAI(resp.StatusCode, resp.Header, b)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// Some servers ignore stream: true; take the whole answer instead.
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return nil, transportError(ctx.Err(), err, true, resp.StatusCode)
		}
		out, perr := parseCompletion(resp.StatusCode, resp.Header, b)
		if perr == nil && onDelta != nil {
			onDelta(out.Content)
		}
		return out, perr
	}
	out := &Response{Status: resp.StatusCode}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	done := false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments, event names, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var ch streamChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			out.Content = text.String()
			return out, malformed(resp.StatusCode, err)
		}
		if hasJSON(ch.Error) {
			out.Content = text.String()
			return out, ClassifyOpenAI(http.StatusInternalServerError, resp.Header, []byte(data))
		}
		if ch.Model != "" {
			out.Model = ch.Model
		}
		for _, choice := range ch.Choices {
			if choice.Delta.Content != "" {
				text.WriteString(choice.Delta.Content)
				if onDelta != nil {
					onDelta(choice.Delta.Content)
				}
			}
			if choice.FinishReason != nil {
				out.FinishReason = *choice.FinishReason
			}
		}
		if ch.Usage != nil {
			out.Usage = &Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
		}
	}
	out.Content = text.String()
	if !done {
		e := &Error{Class: ClassAmbiguous, Status: resp.StatusCode, Code: CodeStreamCut, cause: sc.Err()}
		if ctx.Err() != nil {
			e.Code, e.cause = CodeTimeout, ctx.Err()
		}
		return out, e
	}
	if out.Content == "" {
		return out, &Error{Class: ClassTransient, Status: resp.StatusCode, Code: CodeEmptyOutput, cause: errors.New("empty stream")}
	}
	return out, nil
}
