package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The agent scenario's request: what an agent framework sends on the
// thirtieth turn of a tool loop, in OpenAI's chat-completions shape. Every
// task of the scenario sends the same body; it is built once, from a fixed
// seed, so two runs send byte for byte the same requests.

// AgentShape sizes the agent request.
type AgentShape struct {
	Tools    int // function tools, each with a JSON Schema
	Messages int // history length, system prompt and last user turn included
	Bytes    int // target size of the body; tool results are padded to reach it
}

// DefaultAgentShape is the agent scenario's request: about 32 KiB, 20
// tools, 30 messages.
var DefaultAgentShape = AgentShape{Tools: 20, Messages: 30, Bytes: 32 << 10}

// The request's JSON, field names as OpenAI's. The bench package imports
// no Tollgate package, so it has its own copy of the few it sends.
type (
	agentRequest struct {
		Model             string         `json:"model"`
		Messages          []agentMessage `json:"messages"`
		Tools             []agentTool    `json:"tools"`
		ToolChoice        string         `json:"tool_choice"`
		ParallelToolCalls bool           `json:"parallel_tool_calls"`
		MaxTokens         int            `json:"max_tokens"`
	}
	agentMessage struct {
		Role       string          `json:"role"`
		Content    *string         `json:"content"`
		ToolCalls  []agentToolCall `json:"tool_calls,omitempty"`
		ToolCallID string          `json:"tool_call_id,omitempty"`
	}
	agentToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	agentTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      bool            `json:"strict"`
		} `json:"function"`
	}
)

// agentVerbs and agentNouns name the tools: verb_noun, as agents name
// theirs.
var (
	agentVerbs = []string{"search", "get", "list", "update", "create", "cancel", "refund", "summarize", "lookup", "schedule"}
	agentNouns = []string{"orders", "customer", "invoice", "shipment", "ticket", "product", "inventory", "payment", "address", "subscription", "warehouse", "coupon"}
	// agentWords are the words of the prose: tool descriptions, prompts
	// and tool results draw from them, so the text has the spread of
	// words of real prose (the server indexes a request's words).
	agentWords = strings.Fields(`account active address amount approved arrival available balance batch billing
		carrier cart catalog charge checkout city claim closed code confirmed country credit currency customer
		damaged date delayed delivered delivery discount dispatched draft due email estimate express failed
		fulfilled grade hold identifier inventory invoice issued item label latest line list location locker
		manifest merchant method missing month note number open order origin overdue package paid partial
		payment pending period phone pickup plan policy postal price priority product promised quantity quote
		reason received recipient reference refund region rejected remaining reorder replacement request
		reserved restock return returned route sale scheduled segment shipment shipped size sku slot source
		standard state status stock store street subscription subtotal supplier tax ticket total tracking
		transfer transit unit unpaid updated value variant vendor verified warehouse week weight window zone`)
	agentTypes = []string{"string", "integer", "number", "boolean"}
)

// AgentBody returns the agent request's JSON for shape: shape.Tools tools
// with schemas, a history of shape.Messages messages (system, the user's
// ask, rounds of an assistant's tool calls and their results, the
// assistant's interim answer and the user's next turn), padded through the
// tool results to about shape.Bytes. It returns an error when the shape
// cannot hold one tool round (fewer than 6 messages, or no tool).
func AgentBody(shape AgentShape) ([]byte, error) {
	if shape.Tools < 1 || shape.Messages < 6 {
		return nil, fmt.Errorf("bench: an agent request needs a tool and at least 6 messages, not %d and %d", shape.Tools, shape.Messages)
	}
	// Render unpadded, then spread what is missing over the tool results
	// until the size is within 1 % of the target (a result grows by whole
	// rows, so a pass or two more may be needed).
	pad := 0
	for range 5 {
		body, results, err := renderAgent(shape, pad)
		missing := shape.Bytes - len(body)
		if err != nil || results == 0 || missing < 0 || missing < shape.Bytes/100 {
			return body, err
		}
		pad += missing / results
	}
	body, _, err := renderAgent(shape, pad)
	return body, err
}

// renderAgent builds the body with each tool result padded by pad bytes of
// prose, and returns it with the number of tool results.
func renderAgent(shape AgentShape, pad int) ([]byte, int, error) {
	rng := rand.New(rand.NewPCG(26, 32))
	prose := func(words int) string {
		var b strings.Builder
		for i := range words {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(agentWords[rng.IntN(len(agentWords))])
		}
		return b.String()
	}
	text := func(s string) *string { return &s }

	req := agentRequest{Model: "gpt-4o-mini", ToolChoice: "auto", ParallelToolCalls: true, MaxTokens: 16}
	for i := range shape.Tools {
		var t agentTool
		t.Type = "function"
		t.Function.Name = agentVerbs[i%len(agentVerbs)] + "_" + agentNouns[i%len(agentNouns)]
		if i >= len(agentVerbs) {
			t.Function.Name += fmt.Sprintf("_v%d", i/len(agentVerbs)+1)
		}
		t.Function.Description = prose(14)
		t.Function.Parameters = agentSchema(rng, prose, 3+i%3)
		t.Function.Strict = true
		req.Tools = append(req.Tools, t)
	}

	// system, user, rounds of (assistant with calls, one tool message per
	// call), then the assistant's interim answer and the user's next turn.
	req.Messages = append(req.Messages,
		agentMessage{Role: "system", Content: text("You are the support agent of an online shop. " + prose(180))},
		agentMessage{Role: "user", Content: text(prose(60))})
	results, call := 0, 0
	for round, room := 0, shape.Messages-4; room >= 2; round++ {
		calls := min(1+round%2, room-1) // one call, then two in parallel, in turn
		m := agentMessage{Role: "assistant"}
		for range calls {
			tool := req.Tools[call%len(req.Tools)].Function
			var tc agentToolCall
			tc.ID = fmt.Sprintf("call_%016x%08x", rng.Uint64(), rng.Uint32())
			tc.Type = "function"
			tc.Function.Name = tool.Name
			tc.Function.Arguments = fmt.Sprintf(`{"query":%q,"limit":%d}`, prose(6), 5+call%20)
			m.ToolCalls = append(m.ToolCalls, tc)
			call++
		}
		req.Messages = append(req.Messages, m)
		for _, tc := range m.ToolCalls {
			req.Messages = append(req.Messages, agentMessage{Role: "tool", ToolCallID: tc.ID, Content: text(agentResult(rng, prose, pad))})
			results++
		}
		room -= 1 + calls
		if room == 1 { // an odd message left: the assistant speaks
			req.Messages = append(req.Messages, agentMessage{Role: "assistant", Content: text(prose(30))})
			room--
		}
	}
	req.Messages = append(req.Messages,
		agentMessage{Role: "assistant", Content: text(prose(40))},
		agentMessage{Role: "user", Content: text(prose(25))})
	b, err := json.Marshal(req)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: encode the agent request: %w", err)
	}
	return b, results, nil
}

// agentSchema is a tool's parameters: an object of n properties of the
// four JSON types, some with enums, all required (as strict mode wants).
func agentSchema(rng *rand.Rand, prose func(int) string, n int) json.RawMessage {
	props := map[string]map[string]any{}
	var required []string
	for j := range n {
		name := agentWords[rng.IntN(len(agentWords))] + "_" + agentWords[rng.IntN(len(agentWords))]
		if _, dup := props[name]; dup {
			name += fmt.Sprintf("_%d", j)
		}
		p := map[string]any{"type": agentTypes[j%len(agentTypes)], "description": prose(6)}
		if j%4 == 0 {
			p["enum"] = []string{agentWords[j], agentWords[j+20], agentWords[j+40]}
		}
		props[name] = p
		required = append(required, name)
	}
	schema := map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	b, _ := json.Marshal(schema) // maps of strings and slices always encode
	return b
}

// agentResult is a tool's answer: a JSON document as text, as tools return
// them, of at least two rows and about pad bytes.
func agentResult(rng *rand.Rand, prose func(int) string, pad int) string {
	type row struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Note   string `json:"note"`
	}
	var rows []row
	for size := 0; len(rows) < 2 || size < pad; {
		r := row{ID: fmt.Sprintf("ord_%08d", rng.IntN(1e8)), Status: agentWords[rng.IntN(len(agentWords))], Note: prose(12)}
		size += len(r.ID) + len(r.Status) + len(r.Note) + 36
		rows = append(rows, r)
	}
	b, _ := json.Marshal(map[string]any{"rows": rows, "more": false})
	return string(b)
}
