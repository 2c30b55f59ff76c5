package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type chatRequest struct {
	Model               string    `json:"model"`
	Messages            []message `json:"messages"` // string content only; content arrays are malformed
	MaxTokens           int       `json:"max_tokens"`
	MaxCompletionTokens int       `json:"max_completion_tokens"`
	Stream              bool      `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// handleChat serves POST /v1/chat/completions in the OpenAI format,
// streaming Server-Sent Events when the request asks for it.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	err := readRequest(w, r, &req)
	next, scripted := s.record(Call{ReceivedAt: s.now(), Model: req.Model, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	switch {
	case scripted && req.Stream && (next.StreamCutAfter > 0 || next.ChunkDelayMS > 0):
		s.stream(w, r, req, next)
	case scripted:
		s.serveScripted(w, r, next)
	case err != nil:
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. (fake: "+err.Error()+")")
	case req.Stream:
		s.stream(w, r, req, Scripted{})
	default:
		writeJSON(w, http.StatusOK, s.complete(req))
	}
}

// stream sends the deterministic answer as chat.completion.chunk events, a
// few words each, then the usage chunk when asked for and [DONE]. A script
// entry may slow the chunks down (ChunkDelayMS) or cut the connection after
// some of them (StreamCutAfter).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req chatRequest, sc Scripted) {
	cutAfter := sc.StreamCutAfter
	c := s.complete(req)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	type delta struct {
		Role    string `json:"role,omitempty"`
		Content string `json:"content,omitempty"`
	}
	type chunkChoice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	chunk := func(choices []chunkChoice, u *usage) map[string]any {
		return map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model,
			"choices": choices, "usage": u}
	}
	words := strings.SplitAfter(c.Choices[0].Message.Content, " ")
	send(chunk([]chunkChoice{{Delta: delta{Role: "assistant"}}}, nil))
	for i, wd := range words {
		if cutAfter > 0 && i == cutAfter {
			panic(http.ErrAbortHandler) // the connection dies mid-stream
		}
		var pause <-chan time.Time
		if sc.ChunkDelayMS > 0 {
			pause = time.After(time.Duration(sc.ChunkDelayMS) * time.Millisecond)
		} else {
			ready := make(chan time.Time)
			close(ready)
			pause = ready
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		case <-pause:
		}
		send(chunk([]chunkChoice{{Delta: delta{Content: wd}}}, nil))
	}
	stop := "stop"
	send(chunk([]chunkChoice{{Delta: delta{}, FinishReason: &stop}}, nil))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := c.Usage
		send(chunk([]chunkChoice{}, &u))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// complete builds the deterministic chat completion; a missing max_tokens
// falls back to max_completion_tokens.
func (s *Server) complete(req chatRequest) completion {
	limit := req.MaxTokens
	if limit <= 0 {
		limit = req.MaxCompletionTokens
	}
	a := answerFor(req.Messages, limit)
	return completion{
		ID:      "chatcmpl-fake-" + a.digest[:24],
		Object:  "chat.completion",
		Created: s.now().Unix(),
		Model:   req.Model,
		Choices: []choice{{
			Message:      message{Role: "assistant", Content: a.text},
			FinishReason: "stop",
		}},
		Usage: usage{PromptTokens: a.prompt, CompletionTokens: a.out, TotalTokens: a.prompt + a.out},
	}
}
