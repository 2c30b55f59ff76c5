package fake

import (
	"net/http"
)

type chatRequest struct {
	Model               string    `json:"model"`
	Messages            []message `json:"messages"` // string content only; content arrays are malformed
	MaxTokens           int       `json:"max_tokens"`
	MaxCompletionTokens int       `json:"max_completion_tokens"`
}

// handleChat serves POST /v1/chat/completions in the OpenAI format.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	err := readRequest(w, r, &req)
	if s.take(w, r, req.Model) {
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. (fake: "+err.Error()+")")
		return
	}
	writeJSON(w, http.StatusOK, s.complete(req))
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
