package fake

import (
	"bytes"
	"encoding/json"

	"net/http"
)

type workersAIRequest struct {
	Messages  []workersAIMessage `json:"messages"`
	MaxTokens int                `json:"max_tokens"`
	Stream    bool               `json:"stream"`
	// Tools are Workers AI's own {name, description, parameters} or
	// OpenAI's {type: "function", function: {...}}; both are accepted.
	Tools []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	// ResponseFormat's json_schema is the schema itself, unlike OpenAI's.
	ResponseFormat *struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	} `json:"response_format"`
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	Seed              *int64   `json:"seed"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	PresencePenalty   *float64 `json:"presence_penalty"`
}

type workersAIMessage struct {
	Role       string      `json:"role"`
	Content    chatContent `json:"content"`
	Name       string      `json:"name"`
	ToolCallID string      `json:"tool_call_id"`
	// ToolCalls are {name, arguments} with arguments an object, or
	// OpenAI's {id, type, function: {name, arguments}}.
	ToolCalls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Function  *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// handleWorkersAI serves POST /client/v4/accounts/{account}/ai/run/{model...}
// in the Cloudflare Workers AI envelope. The model is the rest of the path,
// slashes included.
func (s *Server) handleWorkersAI(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	body := readBody(w, r)
	if isWorkersAIEmbedding(body) {
		s.workersAIEmbedding(w, r, model, body)
		return
	}
	var req workersAIRequest
	err := decodeObject(body, &req)
	next, scripted := s.log(r, model, body)
	if scripted && !next.shapes(req.Stream) {
		s.serveScripted(w, r, next)
		return
	}
	if scripted && !s.pause(r, next) {
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
	a := s.workersAIAsk(model, req)
	rp := plan(a, next, "call_fake_")
	if req.Stream {
		s.streamWorkersAI(w, r, rp)
		return
	}
	res := workersAIResultOf(rp)
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), workersAIEnvelope{Result: &res, Success: true, Errors: []workersAIError{}, Messages: []string{}})
}

// argText is tool-call arguments as JSON text, whether sent as an object
// or as a string holding one.
func argText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return compactJSON([]byte(s))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	return compactJSON(raw)
}

func (s *Server) workersAIAsk(model string, req workersAIRequest) ask {
	a := ask{reasoning: s.reasoning[model], parallel: true, n: 1, limit: req.MaxTokens}
	for _, t := range req.Tools {
		name, schema := t.Name, t.Parameters
		if t.Function != nil {
			name, schema = t.Function.Name, t.Function.Parameters
		}
		def, _ := json.Marshal(t)
		a.tools = append(a.tools, tool{Name: name, Schema: schema, size: len(def)})
	}
	if f := req.ResponseFormat; f != nil {
		a.format, a.schema = f.Type, f.JSONSchema
	}
	for _, m := range req.Messages {
		t := turn{Role: m.Role, Content: m.Content.text, Name: m.Name, Images: m.Content.images, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			name, args := c.Name, c.Arguments
			if c.Function != nil {
				name, args = c.Function.Name, c.Function.Arguments
			}
			t.ToolCalls = append(t.ToolCalls, toolCall{ID: c.ID, Name: name, Arguments: argText(args)})
		}
		a.turns = append(a.turns, t)
	}
	a.afterToolResult = len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "tool"
	return a
}

type workersAIEnvelope struct {
	Result   *workersAIResult `json:"result"`
	Success  bool             `json:"success"`
	Errors   []workersAIError `json:"errors"`
	Messages []string         `json:"messages"`
}

// workersAIResult is the answer: response is the text, the JSON value
// itself in JSON mode, and null beside tool calls.
type workersAIResult struct {
	Response  any                 `json:"response"`
	ToolCalls []workersAIToolCall `json:"tool_calls,omitempty"`
	Usage     usage               `json:"usage"`
}

type workersAIToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func workersAIResultOf(rp reply) workersAIResult {
	res := workersAIResult{Usage: usageOf(rp)}
	switch {
	case rp.refusal != "":
		res.Response = rp.refusal
	case rp.calls != nil:
		for _, c := range rp.calls {
			res.ToolCalls = append(res.ToolCalls, workersAIToolCall{Name: c.Name, Arguments: json.RawMessage(c.Arguments)})
		}
	case rp.structured && json.Valid([]byte(rp.content)):
		res.Response = json.RawMessage(rp.content)
	default:
		res.Response = rp.content
	}
	return res
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

// streamWorkersAI sends rp as Workers AI's stream: data events
// {"response": "<word>"} (a JSON answer streamed as its text), then for tool
// calls one {"response": "", "tool_calls": [...]}, then {"response": "",
// "usage": {...}} and [DONE]. The script may slow the text events
// (ChunkDelayMS) or cut the connection after some (StreamCutAfter).
func (s *Server) streamWorkersAI(w http.ResponseWriter, r *http.Request, rp reply) {
	res := workersAIResultOf(rp)
	sc := rp.sc
	out := startSSE(w, sc)
	text := rp.content
	if rp.refusal != "" {
		text = rp.refusal
	} else if rp.calls != nil {
		text = ""
	}
	for i, wd := range words(text) {
		if sc.StreamCutAfter > 0 && i == sc.StreamCutAfter {
			panic(http.ErrAbortHandler)
		}
		if !s.waitChunk(r, sc) {
			return
		}
		out.send("", map[string]string{"response": wd})
	}
	if res.ToolCalls != nil {
		out.send("", map[string]any{"response": "", "tool_calls": res.ToolCalls})
	}
	out.send("", map[string]any{"response": "", "usage": res.Usage})
	out.done()
}
