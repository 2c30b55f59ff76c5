package tasks

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

// checking is a client whose adapter cannot carry logit_bias.
type checking struct{}

func (checking) Complete(context.Context, provider.Request) (*provider.Response, error) {
	return nil, errors.New("not called")
}

func (checking) Check(c provider.Chat) error {
	if c.LogitBias != nil {
		return &provider.Unsupported{Field: "logit_bias", Reason: "this provider has no logit_bias"}
	}
	return nil
}

const fitCatalog = `
providers:
  - {key: oa, kind: openai, base_url: fake}
  - {key: oa2, kind: openai, base_url: fake, max_tokens_param: max_completion_tokens}
  - {key: an, kind: anthropic, base_url: fake}
default_model: plain
models:
  - {name: plain, provider: oa, input_micros_per_mtok: 1000000, output_micros_per_mtok: 1000000, fallback: [capable]}
  - {name: capable, provider: oa, input_micros_per_mtok: 2000000, output_micros_per_mtok: 2000000, tools: true, vision: true, json_schema: true, reasoning: true}
  - {name: lonely, provider: oa, context_window: 100, max_output_tokens: 40}
  - {name: thinker, provider: oa, reasoning: true, max_output_tokens: 500}
  - {name: asks-mct, provider: oa2}
  - {name: claude, provider: an, tools: true, fallback: [capable]}
`

func fitService(t *testing.T) *Service {
	t.Helper()
	cat, err := catalog.Parse([]byte(fitCatalog), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Catalog: cat, DefaultMaxTokens: 1024,
		Clients: map[string]provider.Client{"oa": nil, "oa2": nil, "an": checking{}}}
	s := &Service{cfg: cfg, fitting: newModelFit(cfg)}
	s.wire(nil, nil, nil)
	return s
}

func resolve(t *testing.T, s *Service, name string) catalog.Model {
	t.Helper()
	m, _, err := s.cfg.Catalog.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var hello = []provider.Message{{Role: "user", Content: provider.Text("abcdefgh")}} // 2 tokens + 4 of framing

// The output limit goes under the name the client used; Tollgate's
// default goes as max_completion_tokens to a reasoning model or a provider
// key that asks for it, else as max_tokens, clamped to the model's bound.
func TestChatForNamesTheOutputLimit(t *testing.T) {
	t.Parallel()
	s := fitService(t)
	cases := []struct {
		name          string
		model         string
		req           Request
		maxTokens     int
		maxCompletion int
	}{
		{"default to a plain model", "plain", Request{}, 1024, 0},
		{"default to a reasoning model", "thinker", Request{}, 0, 500},
		{"default where the provider key asks", "asks-mct", Request{}, 0, 1024},
		{"default clamped to the model's bound", "lonely", Request{}, 40, 0},
		{"the client's max_tokens to a reasoning model", "thinker", Request{Chat: provider.Chat{MaxTokens: 300}}, 300, 0},
		{"the client's max_completion_tokens to a plain model", "plain", Request{Chat: provider.Chat{MaxCompletionTokens: 300}}, 0, 300},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.Model, req.Messages = c.model, hello
			m := resolve(t, s, c.model)
			got := s.fitting.providerRequest(&begunAttempt{task: Task{ID: "t"}, attempt: 2, model: m, raw: req})
			if got.MaxTokens != c.maxTokens || got.MaxCompletionTokens != c.maxCompletion {
				t.Errorf("max_tokens %d, max_completion_tokens %d; want %d, %d", got.MaxTokens, got.MaxCompletionTokens, c.maxTokens, c.maxCompletion)
			}
			if got.Model != m.ProviderModel || got.IdempotencyKey != "t:2" {
				t.Errorf("model %q key %q", got.Model, got.IdempotencyKey)
			}
		})
	}
}

// The input estimate counts the whole history, the tool definitions and
// the schema, images at their kind's figure and never their URL's
// length; the output side is the limit times the choices.
func TestReservedTokens(t *testing.T) {
	t.Parallel()
	s := fitService(t)
	long := make([]byte, 4000)
	for i := range long {
		long[i] = 'x'
	}
	image := provider.Message{Role: "user", Content: provider.Content{Parts: []provider.Part{{Type: provider.PartText, Text: "abcd"},
		{Type: provider.PartImage, ImageURL: &provider.ImageURL{URL: "data:image/png;base64," + string(long)}}}}}
	call := provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "call_123", Type: "function",
		Function: provider.FunctionCall{Name: "lookup", Arguments: `{"q":"abcdefgh"}`}}}}
	result := provider.Message{Role: "tool", ToolCallID: "call_123", Content: provider.Text("abcdefghabcdefgh")}
	tool := provider.Tool{Type: "function", Function: provider.FunctionDef{Name: "lookup", Description: "Look a thing up.",
		Parameters: []byte(`{"properties":{"q":{"type":"string"}},"type":"object"}`)}}
	cases := []struct {
		name    string
		model   string
		chat    provider.Chat
		in, out int64
	}{
		{"plain, as before", "plain", provider.Chat{Messages: hello}, 6, 1024},
		{"n choices", "plain", provider.Chat{Messages: hello, MaxTokens: 100, Params: provider.Params{N: 3}}, 6, 300},
		{"an image on OpenAI", "capable", provider.Chat{Messages: []provider.Message{image}}, 4 + 1 + imageTokensOpenAI, 1024},
		{"an image on Anthropic", "claude", provider.Chat{Messages: []provider.Message{image}}, 4 + 1 + imageTokensAnthropic, 1024},
		// 4 + 2 framing and "abcdefgh"; 4 + call_123 (2) + lookup (2) + arguments (4); 4 + call_123 (2) + 16 bytes (4);
		// 8 + lookup (2) + description (4) + parameters (14).
		{"a tool loop", "capable", provider.Chat{Messages: []provider.Message{hello[0], call, result}, Tools: []provider.Tool{tool}},
			6 + 12 + 10 + 28, 1024},
		{"a schema", "capable", provider.Chat{Messages: hello, ResponseFormat: &provider.ResponseFormat{Type: provider.FormatJSONSchema,
			JSONSchema: &provider.JSONSchema{Name: "abcd", Schema: []byte(`{"type":"object"}`)}}}, 6 + 1 + 5, 1024},
		{"choices times a huge limit saturate", "plain", provider.Chat{Messages: hello, MaxTokens: math.MaxInt, Params: provider.Params{N: math.MaxInt}}, 6, math.MaxInt64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, out := s.fitting.reservedTokens(resolve(t, s, c.model), Request{Chat: c.chat})
			if in != c.in || out != c.out {
				t.Errorf("reserved %d in, %d out; want %d, %d", in, out, c.in, c.out)
			}
		})
	}
}

// The first model of the chain that can take a request runs it, and its
// fallbacks are only those that can too; with none, the asked model's
// refusal names the field and the capability.
func TestFit(t *testing.T) {
	t.Parallel()
	s := fitService(t)
	tools := []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f"}}}
	big := make([]byte, 400) // 100 tokens
	for i := range big {
		big[i] = 'x'
	}
	cases := []struct {
		name    string
		model   string
		chat    provider.Chat
		fitting []string
		refusal *RefusedError
	}{
		{"plain request, whole chain", "plain", provider.Chat{Messages: hello}, []string{"plain", "capable"}, nil},
		{"tools skip the plain model", "plain", provider.Chat{Messages: hello, Tools: tools}, []string{"capable"}, nil},
		{"no model of the chain", "lonely", provider.Chat{Messages: hello, Tools: tools}, nil,
			&RefusedError{Field: "tools", Code: CodeModelLacksTools}},
		{"the asked model's context window", "lonely", provider.Chat{Messages: []provider.Message{{Role: "user", Content: provider.Text(string(big))}}, MaxTokens: 1}, nil,
			&RefusedError{Field: "messages", Code: CodeContextWindowExceeded}},
		{"a default limit is clamped, not refused", "lonely", provider.Chat{Messages: hello}, []string{"lonely"}, nil},
		{"a client limit above the bound", "lonely", provider.Chat{Messages: hello, MaxCompletionTokens: 41}, nil,
			&RefusedError{Field: "max_completion_tokens", Code: CodeOutputLimitExceeded}},
		{"reasoning_effort", "lonely", provider.Chat{Messages: hello, Params: provider.Params{ReasoningEffort: "low"}}, nil,
			&RefusedError{Field: "reasoning_effort", Code: CodeModelLacksReasoning}},
		{"the adapter's refusal skips its model", "claude", provider.Chat{Messages: hello, Params: provider.Params{LogitBias: map[string]int{"1": 1}}},
			[]string{"capable"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fitting, err := s.fitting.fit(resolve(t, s, c.model), Request{Chat: c.chat})
			var names []string
			for _, m := range fitting {
				names = append(names, m.Name)
			}
			if diff := cmp.Diff(c.fitting, names); diff != "" {
				t.Errorf("fitting mismatch (-want +got):\n%s", diff)
			}
			var r *RefusedError
			if c.refusal == nil {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &r) || r.Field != c.refusal.Field || r.Code != c.refusal.Code || r.Message == "" {
				t.Errorf("error %v, want a refusal of %s with %s", err, c.refusal.Field, c.refusal.Code)
			}
		})
	}
	// An adapter's refusal with no other model: unsupported_field.
	_, err := s.fitting.fit(catalog.Model{Name: "solo", Provider: "an"}, Request{Chat: provider.Chat{Messages: hello, Params: provider.Params{LogitBias: map[string]int{"1": 1}}}})
	var r *RefusedError
	if !errors.As(err, &r) || r.Code != CodeUnsupportedField || r.Field != "logit_bias" {
		t.Errorf("adapter refusal: %v", err)
	}
}
