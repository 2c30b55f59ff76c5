package tasks

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
)

// TestEventViewDecidesEveryField: a field added to Result, Choice,
// provider.Message, provider.Part, provider.ToolCall or EmbeddingResult
// fails here until eventView decides what an event carries of it (then
// list it, and extend TestEventViewFollowsThePolicy to hold it).
func TestEventViewDecidesEveryField(t *testing.T) {
	t.Parallel()
	known := map[reflect.Type][]string{
		reflect.TypeFor[Result](): {"Output", "Message", "Choices", "Logprobs", "Model", "SystemFingerprint", "FinishReason",
			"StopReason", "StopSequence", "Native", "Usage", "CostMicros", "Embedding", "sealedOutput", "sealedAnswer"},
		reflect.TypeFor[Choice]():            {"Index", "Message", "FinishReason", "Logprobs", "StopReason", "StopSequence"},
		reflect.TypeFor[provider.Message]():  {"Role", "Content", "Name", "ToolCalls", "ToolCallID", "Refusal", "IsError", "CacheControl"},
		reflect.TypeFor[provider.Part]():     {"Type", "Text", "ImageURL", "Thinking", "Signature", "Data", "CacheControl"},
		reflect.TypeFor[provider.ToolCall](): {"ID", "Type", "Function", "CacheControl"},
		reflect.TypeFor[EmbeddingResult]():   {"Count", "Dimensions", "SHA256", "Vectors"},
	}
	for typ, fields := range known {
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; !slices.Contains(fields, name) {
				t.Errorf("%s.%s: a field eventView has not decided", typ, name)
			}
		}
	}
}

// TestEventViewFollowsThePolicy: a result with secret text in every
// field that carries model output or client text. Under hash-only none
// of it is left, every text a digest; under redact the address becomes
// a placeholder and the rest reads as stored; full is Get's.
func TestEventViewFollowsThePolicy(t *testing.T) {
	t.Parallel()
	r, err := redact.New()
	if err != nil {
		t.Fatal(err)
	}
	s := &reader{guard: &guard{cfg: &Config{Redactor: r}, digestKey: []byte("0123456789abcdef0123456789abcdef")}}
	const word, mail = "ZEBRA-LAUNCH-CODE", "canary.person@example.com"
	secret := word + " " + mail
	msg := func() provider.Message {
		return provider.Message{Role: "assistant", Name: secret, Refusal: secret, Content: provider.Content{Parts: []provider.Part{
			{Type: "text", Text: secret}, {Type: "thinking", Thinking: secret, Signature: secret}, {Type: "redacted_thinking", Data: secret}}},
			ToolCalls: []provider.ToolCall{{ID: secret, Type: "function", Function: provider.FunctionCall{Name: secret, Arguments: `{"to":"` + secret + `"}`}}}}
	}
	first := msg()
	task := Task{ID: "t1", Status: StatusSucceeded, Result: &Result{
		Output: secret, Message: &first, Choices: []Choice{{Index: 0, Message: msg(), StopSequence: secret, Logprobs: json.RawMessage(`{"t":"` + secret + `"}`)},
			{Index: 1, Message: msg(), Logprobs: json.RawMessage(`[90,69]`)}},
		Logprobs: json.RawMessage(`{"content":[{"token":"` + word + `","bytes":[90,69]}]}`), Model: "test-model", FinishReason: "stop",
		StopSequence: secret, Usage: Usage{InputTokens: 7, OutputTokens: 9}, CostMicros: 42,
		Embedding: &EmbeddingResult{Count: 1, Dimensions: 2, SHA256: "abc", Vectors: [][]float32{{0.5, 0.25}}},
	}}
	for _, c := range []struct {
		policy       redact.Policy
		kept, absent []string
	}{
		{redact.PolicyHashOnly, []string{"[DIGEST:", `"cost_micros":42`, `"output_tokens":9`, `"sha256":"abc"`, `"id":"t1"`, `"status":"succeeded"`},
			[]string{word, mail, "ZEBRA", "[90,69]", "0.25", "logprobs", "vectors"}},
		{redact.PolicyRedact, []string{word, "[EMAIL_1]", `"cost_micros":42`, `"sha256":"abc"`}, []string{mail, "[90,69]", "0.25", "logprobs", "vectors"}},
		{redact.PolicyFull, []string{word, mail, "[90,69]", "0.25"}, nil},
	} {
		tc := task
		tc.policy = string(c.policy)
		b, err := json.Marshal(s.eventView(tc, nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range c.kept {
			if !strings.Contains(string(b), k) {
				t.Errorf("%s: %s lacks %q", c.policy, b, k)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(string(b), a) {
				t.Errorf("%s: %s holds %q", c.policy, b, a)
			}
		}
	}
	if task.Result.Output != secret || task.Result.Message.ToolCalls[0].ID != secret || task.Result.Choices[0].Message.Refusal != secret {
		t.Errorf("eventView changed the task it was given")
	}
}
