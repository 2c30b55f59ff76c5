package bench

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAgentBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		shape AgentShape
	}{
		{"the default shape", DefaultAgentShape},
		{"small", AgentShape{Tools: 3, Messages: 7, Bytes: 8 << 10}},
		{"even history", AgentShape{Tools: 20, Messages: 30, Bytes: 64 << 10}},
		{"odd history", AgentShape{Tools: 5, Messages: 11, Bytes: 16 << 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := AgentBody(tt.shape)
			if err != nil {
				t.Fatal(err)
			}
			if lo, hi := tt.shape.Bytes*95/100, tt.shape.Bytes*105/100; len(body) < lo || len(body) > hi {
				t.Errorf("body is %d bytes, want %d to %d", len(body), lo, hi)
			}
			var req agentRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatalf("body is not the request's JSON: %v", err)
			}
			if len(req.Tools) != tt.shape.Tools {
				t.Errorf("%d tools, want %d", len(req.Tools), tt.shape.Tools)
			}
			if len(req.Messages) != tt.shape.Messages {
				t.Errorf("%d messages, want %d", len(req.Messages), tt.shape.Messages)
			}
			checkToolLoop(t, req)
			again, err := AgentBody(tt.shape)
			if err != nil || !bytes.Equal(body, again) {
				t.Errorf("a second build differs (err %v): the body must be the same in every run", err)
			}
		})
	}
}

// checkToolLoop checks what a server validating a tool loop checks: unique
// tool names with object schemas, calls to declared tools with JSON
// arguments, and every tool message answering an earlier call, once.
func checkToolLoop(t *testing.T, req agentRequest) {
	t.Helper()
	tools := map[string]bool{}
	for _, tool := range req.Tools {
		f := tool.Function
		if tools[f.Name] {
			t.Errorf("tool %q declared twice", f.Name)
		}
		tools[f.Name] = true
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(f.Parameters, &schema); err != nil || schema.Type != "object" || len(schema.Required) != len(schema.Properties) {
			t.Errorf("tool %q: parameters %s are not a strict object schema (%v)", f.Name, f.Parameters, err)
		}
	}
	calls := map[string]bool{} // id → answered
	roles := map[string]int{}
	for i, m := range req.Messages {
		roles[m.Role]++
		for _, tc := range m.ToolCalls {
			if !tools[tc.Function.Name] {
				t.Errorf("message %d calls undeclared tool %q", i, tc.Function.Name)
			}
			if !json.Valid([]byte(tc.Function.Arguments)) {
				t.Errorf("message %d: arguments %q are not JSON", i, tc.Function.Arguments)
			}
			if _, dup := calls[tc.ID]; dup {
				t.Errorf("message %d: call id %q used twice", i, tc.ID)
			}
			calls[tc.ID] = false
		}
		if m.Role == "tool" {
			answered, known := calls[m.ToolCallID]
			if !known || answered {
				t.Errorf("message %d answers call %q, which no earlier message made or another answered", i, m.ToolCallID)
			}
			calls[m.ToolCallID] = true
		}
		if m.Role != "assistant" && m.Content == nil {
			t.Errorf("message %d (%s) has no content", i, m.Role)
		}
	}
	for id, answered := range calls {
		if !answered {
			t.Errorf("call %q has no tool message", id)
		}
	}
	if roles["tool"] == 0 || roles["system"] != 1 || req.Messages[len(req.Messages)-1].Role != "user" {
		t.Errorf("roles %v, last %q: want one system message, tool results, and a user's turn last", roles, req.Messages[len(req.Messages)-1].Role)
	}
}
