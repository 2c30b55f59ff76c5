package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/provider"
)

// A plain-text request hashes as it always has: the SHA-256 of its JSON
// line, with no trace of the fields it does not use.
func TestPlainRequestHashIsUnchanged(t *testing.T) {
	t.Parallel()
	r := decodeRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"metadata":{"a":1},"deadline_s":60}`)
	want := sha256.Sum256([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"metadata":{"a":1},"deadline_s":60}` + "\n"))
	if !bytes.Equal(r.Hash(), want[:]) {
		t.Error("a plain request's hash changed")
	}
	if n1 := decodeRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"metadata":{"a":1},"deadline_s":60,"n":1}`); !bytes.Equal(n1.Hash(), want[:]) {
		t.Error("n = 1 hashes apart from no n, though it asks the same")
	}
}

// JSON values a request carries (schemas, passthrough fields) hash alike
// whatever the order of their keys and their spacing.
func TestHashReadsCarriedJSONCanonically(t *testing.T) {
	t.Parallel()
	a := decodeRequest(t, `{"messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}}}}],
		"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","required":["x"]}}},
		"passthrough":{"prediction":{"type":"content","content":"x"},"store":true}}`)
	b := decodeRequest(t, `{"passthrough":{"store":true,"prediction":{ "content":"x", "type":"content" }},
		"response_format":{"json_schema":{"schema":{ "required":["x"], "type":"object" },"name":"s"},"type":"json_schema"},
		"tools":[{"function":{"parameters":{ "properties":{"a":{"type":"number"},"b":{"type":"string"}}, "type":"object" },"name":"f"},"type":"function"}],
		"messages":[{"content":"hi","role":"user"}]}`)
	if !bytes.Equal(a.Hash(), b.Hash()) {
		t.Error("equal requests hash differently")
	}
	c := a.Canonical()
	if got := string(c.Tools[0].Function.Parameters); got != `{"properties":{"a":{"type":"number"},"b":{"type":"string"}},"type":"object"}` {
		t.Errorf("canonical parameters = %s", got)
	}
	if got := string(c.Extra["prediction"]); got != `{"content":"x","type":"content"}` {
		t.Errorf("canonical passthrough = %s", got)
	}
	if string(b.Tools[0].Function.Parameters) == got(c.Tools[0].Function.Parameters) {
		t.Error("Canonical changed the request it was given")
	}
}

func got(raw json.RawMessage) string { return string(raw) }

// Every field that changes the provider call changes the hash.
func TestHashCoversEveryFieldOfTheCall(t *testing.T) {
	t.Parallel()
	f, tr := 0.5, true
	cases := []struct {
		field  string
		change func(r *Request)
	}{
		{"model", func(r *Request) { r.Model = "other" }},
		{"messages[].content", func(r *Request) { r.Messages[7].Content = provider.Text("Try once more.") }},
		{"messages[].role", func(r *Request) { r.Messages[0].Role = "system" }},
		{"messages[].name", func(r *Request) { r.Messages[2].Name = "bob" }},
		{"messages[].content[].image_url.detail", func(r *Request) { r.Messages[2].Content.Parts[1].ImageURL.Detail = "high" }},
		{"messages[].content[].image_url.url", func(r *Request) { r.Messages[2].Content.Parts[2].ImageURL.URL = "data:image/png;base64,iVBORw0KGgp=" }},
		{"messages[].tool_calls[].function.arguments", func(r *Request) { r.Messages[3].ToolCalls[0].Function.Arguments = `{"city":"Bergen"}` }},
		{"messages[].tool_calls[].id", func(r *Request) { r.Messages[3].ToolCalls[1].ID = "call_3"; r.Messages[5].ToolCallID = "call_3" }},
		{"messages[].tool_call_id", func(r *Request) { r.Messages[4].ToolCallID = "call_2" }},
		{"messages[].refusal", func(r *Request) { r.Messages[6].Refusal = "No." }},
		{"max_completion_tokens", func(r *Request) { r.MaxCompletionTokens = 101 }},
		{"max_tokens for max_completion_tokens", func(r *Request) { r.MaxTokens, r.MaxCompletionTokens = 100, 0 }},
		{"tools[].function.description", func(r *Request) { r.Tools[0].Function.Description = "Weather" }},
		{"tools[].function.parameters", func(r *Request) { r.Tools[1].Function.Parameters = json.RawMessage(`{"type":"object"}`) }},
		{"tools[].function.strict", func(r *Request) { r.Tools[1].Function.Strict = &tr }},
		{"tools order", func(r *Request) { r.Tools[0], r.Tools[1] = r.Tools[1], r.Tools[0] }},
		{"tool_choice", func(r *Request) { r.ToolChoice = &provider.ToolChoice{Mode: "required"} }},
		{"parallel_tool_calls", func(r *Request) { r.ParallelToolCalls = nil }},
		{"response_format", func(r *Request) { r.ResponseFormat = &provider.ResponseFormat{Type: "json_object"} }},
		{"response_format.json_schema.strict", func(r *Request) { r.ResponseFormat.JSONSchema.Strict = nil }},
		{"temperature", func(r *Request) { r.Temperature = &f }},
		{"top_p", func(r *Request) { r.TopP = &f }},
		{"seed", func(r *Request) { s := int64(1); r.Seed = &s }},
		{"stop", func(r *Request) { r.Stop = provider.Stop{"END"} }},
		{"presence_penalty", func(r *Request) { r.PresencePenalty = &f }},
		{"frequency_penalty", func(r *Request) { r.FrequencyPenalty = &f }},
		{"logit_bias", func(r *Request) { r.LogitBias = map[string]int{"50256": -99} }},
		{"logprobs", func(r *Request) { r.Logprobs, r.TopLogprobs = nil, nil }},
		{"top_logprobs", func(r *Request) { n := 1; r.TopLogprobs = &n }},
		{"n", func(r *Request) { r.N = 2 }},
		{"user", func(r *Request) { r.User = "u-2" }},
		{"safety_identifier", func(r *Request) { r.SafetyIdentifier = "s-2" }},
		{"reasoning_effort", func(r *Request) { r.ReasoningEffort = "high" }},
		{"verbosity", func(r *Request) { r.Verbosity = "high" }},
		{"passthrough", func(r *Request) { r.Extra = map[string]json.RawMessage{"service_tier": json.RawMessage(`"priority"`)} }},
		{"passthrough added", func(r *Request) { r.Extra["modalities"] = json.RawMessage(`["text"]`) }},
		{"json_mode", func(r *Request) { r.ResponseFormat, r.JSONMode = nil, true }},
		{"deadline_s", func(r *Request) { r.DeadlineS = 61 }},
		{"metadata", func(r *Request) { r.Metadata = map[string]any{"ticket": 8} }},
		{"conversation", func(r *Request) { r.Conversation = &Conversation{Unstored: true} }},
	}
	base := decodeRequest(t, agentRequest).Hash()
	seen := map[string]string{}
	for _, c := range cases {
		r := decodeRequest(t, agentRequest)
		c.change(&r)
		if err := r.Validate(); err != nil {
			t.Errorf("%s: the changed request is invalid: %v", c.field, err)
		}
		h := string(r.Hash())
		if h == string(base) {
			t.Errorf("%s: a change leaves the hash as it was", c.field)
		}
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike", c.field, other)
		}
		seen[h] = c.field
	}
}
