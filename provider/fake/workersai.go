package fake

import (
	"net/http"
)

type workersAIRequest struct {
	Messages  []message `json:"messages"`
	MaxTokens int       `json:"max_tokens"`
}

// handleWorkersAI serves POST /client/v4/accounts/{account}/ai/run/{model...}
// in the Cloudflare Workers AI envelope. The model is the rest of the path,
// slashes included.
func (s *Server) handleWorkersAI(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	var req workersAIRequest
	err := readRequest(w, r, &req)
	if s.take(w, r, model) {
		return
	}
	switch {
	case model == "":
		writeWorkersAIError(w, http.StatusBadRequest, 5007, "No such model  or task")
		return
	case err != nil:
		writeWorkersAIError(w, http.StatusBadRequest, 5006, "AiError: Bad input: fake: "+err.Error())
		return
	}
	a := answerFor(req.Messages, req.MaxTokens)
	writeJSON(w, http.StatusOK, workersAIEnvelope{
		Result: &workersAIResult{
			Response: a.text,
			Usage:    usage{PromptTokens: a.prompt, CompletionTokens: a.out, TotalTokens: a.prompt + a.out},
		},
		Success:  true,
		Errors:   []workersAIError{},
		Messages: []string{},
	})
}

type workersAIEnvelope struct {
	Result   *workersAIResult `json:"result"`
	Success  bool             `json:"success"`
	Errors   []workersAIError `json:"errors"`
	Messages []string         `json:"messages"`
}

type workersAIResult struct {
	Response string `json:"response"`
	Usage    usage  `json:"usage"`
}

type workersAIError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeWorkersAIError answers in the Cloudflare error envelope.
func writeWorkersAIError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, workersAIEnvelope{
		Success:  false,
		Errors:   []workersAIError{{Code: code, Message: msg}},
		Messages: []string{},
	})
}
