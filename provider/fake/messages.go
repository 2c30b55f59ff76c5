package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	System    blocks `json:"system"`
	Messages  []struct {
		Role    string `json:"role"`
		Content blocks `json:"content"`
	} `json:"messages"`
}

// blocks is Anthropic content: a string, or an array of content blocks whose
// text blocks are joined.
type blocks string

func (b *blocks) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				sb.WriteString(p.Text)
			}
		}
		*b = blocks(sb.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errors.New("content must be a string or an array of content blocks")
	}
	*b = blocks(s)
	return nil
}

// handleMessages serves POST /v1/messages in the Anthropic Messages format.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	err := readRequest(w, r, &req)
	next, scripted := s.record(Call{ReceivedAt: s.now(), Model: req.Model, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	switch {
	case scripted && req.Stream && (next.StreamCutAfter > 0 || next.ChunkDelayMS > 0):
		s.streamMessage(w, r, req, next)
		return
	case scripted:
		s.serveScripted(w, r, next)
		return
	}
	switch {
	case err == nil && req.Stream && req.MaxTokens > 0:
		s.streamMessage(w, r, req, Scripted{})
		return
	case err != nil:
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "fake: "+err.Error())
		return
	case req.MaxTokens <= 0:
		// The real API requires it; so does the fake, to catch clients
		// that forget.
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	}
	writeJSON(w, http.StatusOK, s.message(req))
}

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   string           `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// message builds the deterministic answer. The system prompt counts as one
// leading system message, so that a conversation with one system message
// gets the same text and token counts as on /v1/chat/completions.
func (s *Server) message(req messagesRequest) anthropicMessage {
	var msgs []message
	if req.System != "" {
		msgs = append(msgs, message{Role: "system", Content: string(req.System)})
	}
	for _, m := range req.Messages {
		msgs = append(msgs, message{Role: m.Role, Content: string(m.Content)})
	}
	a := answerFor(msgs, req.MaxTokens)
	return anthropicMessage{
		ID:         "msg_fake_" + a.digest[:24],
		Type:       "message",
		Role:       "assistant",
		Model:      req.Model,
		Content:    []anthropicBlock{{Type: "text", Text: a.text}},
		StopReason: "end_turn",
		Usage:      anthropicUsage{InputTokens: a.prompt, OutputTokens: a.out},
	}
}

// writeAnthropicError answers in the Anthropic error shape.
func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	writeJSON(w, status, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}})
}

// streamMessage sends the deterministic answer as Messages API events:
// message_start (input usage), text deltas a word at a time, message_delta
// (stop reason, output usage), message_stop. A script entry may slow the
// deltas (ChunkDelayMS) or cut the connection after some (StreamCutAfter).
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, req messagesRequest, sc Scripted) {
	m := s.message(req)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := map[string]any{"id": m.ID, "type": "message", "role": "assistant", "model": m.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": m.Usage.InputTokens, "output_tokens": 1}}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	for i, word := range strings.SplitAfter(m.Content[0].Text, " ") {
		if sc.StreamCutAfter > 0 && i == sc.StreamCutAfter {
			panic(http.ErrAbortHandler)
		}
		if sc.ChunkDelayMS > 0 {
			select {
			case <-time.After(time.Duration(sc.ChunkDelayMS) * time.Millisecond):
			case <-r.Context().Done():
				return
			case <-s.closed:
				panic(http.ErrAbortHandler)
			}
		}
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": word}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": m.Usage.OutputTokens}})
	send("message_stop", map[string]string{"type": "message_stop"})
}
