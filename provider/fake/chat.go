package fake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

type chatRequest struct {
	Model               string    `json:"model"`
	Messages            []message `json:"messages"`
	MaxTokens           int       `json:"max_tokens"`
	MaxCompletionTokens int       `json:"max_completion_tokens"`
}

// message takes string content only; content arrays are rejected as malformed.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	var req chatRequest
	if err == nil {
		err = decodeObject(body, &req)
	}
	// Log before choosing the answer, so that tests see every call,
	// including ones that fail.
	next, scripted := s.record(Call{
		ReceivedAt:     s.now(),
		Model:          req.Model,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	if scripted {
		s.serveScripted(w, r, next)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. (fake: "+err.Error()+")")
		return
	}
	writeJSON(w, http.StatusOK, s.complete(req))
}

func decodeObject(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return errors.New("request body is not a JSON object")
	}
	return json.Unmarshal(body, v)
}

// serveScripted answers with sc. A handler released by Close cuts its
// connection, as a provider that dies mid-call would.
func (s *Server) serveScripted(w http.ResponseWriter, r *http.Request, sc Scripted) {
	if sc.DelayMS > 0 {
		t := time.NewTimer(time.Duration(sc.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	if sc.Hang {
		select {
		case <-r.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	status := sc.Status
	if status == 0 {
		status = http.StatusOK
	}
	if status < 200 || status > 599 {
		writeError(w, http.StatusInternalServerError, "fake: scripted status "+strconv.Itoa(sc.Status)+" is not 0 or 200-599")
		return
	}
	// Sorted, so that keys differing only in case resolve the same way
	// every time.
	keys := make([]string, 0, len(sc.Headers))
	for k := range sc.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.Header().Set(k, sc.Headers[k])
	}
	if sc.Body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, sc.Body)
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

// complete builds the deterministic answer described in the package
// documentation.
func (s *Server) complete(req chatRequest) completion {
	msgs := req.Messages
	if msgs == nil {
		msgs = []message{}
	}
	canonical, _ := json.Marshal(msgs) // cannot fail: strings only
	sum := sha256.Sum256(canonical)
	digest := hex.EncodeToString(sum[:])

	prompt := 0
	for _, m := range msgs {
		prompt += (len(m.Content)+3)/4 + 4
	}
	limit := req.MaxTokens
	if limit <= 0 {
		limit = req.MaxCompletionTokens
	}
	if limit <= 0 {
		limit = 16
	}
	out := min(limit, 16)

	return completion{
		ID:      "chatcmpl-fake-" + digest[:24],
		Object:  "chat.completion",
		Created: s.now().Unix(),
		Model:   req.Model,
		Choices: []choice{{
			Message:      message{Role: "assistant", Content: "fake completion " + digest[:12]},
			FinishReason: "stop",
		}},
		Usage: usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out},
	}
}
