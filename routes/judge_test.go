package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// A succeeded task with tool calls is answered with them, unguarded; only
// a final answer meets the output guard; a call of a tool the route does
// not declare is the model breaking the route's contract.
func TestJudge(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Parse([]byte(`
providers: [{key: p, kind: openai, base_url: fake}]
models: [{name: m, provider: p, tools: true}]
routes:
  - name: orders
    prompt_version: "1"
    system_prompt: "s"
    user_template: "{{q}}"
    input: [{name: q, type: string}]
    model: m
    max_tokens: 10
    deadline_ms: 1000
    output: {type: text, max_length: 20}
    fallback: "x"
    on_failure: fallback
    tools: [{name: lookup_order, parameters: {type: object}}]
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cat)
	if err != nil {
		t.Fatal(err)
	}
	r := rs["orders"]
	lookup := provider.ToolCall{ID: "call_1", Type: "function", Function: provider.FunctionCall{Name: "lookup_order", Arguments: `{"number":"42"}`}}
	refund := provider.ToolCall{ID: "call_2", Type: "function", Function: provider.FunctionCall{Name: "refund", Arguments: `{}`}}
	cases := []struct {
		name       string
		res        *tasks.Result
		wantMsg    *provider.Message
		wantValue  any
		wantReason string
	}{
		{"tool calls, empty text", &tasks.Result{FinishReason: "tool_calls", Message: &provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{lookup}}},
			&provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{lookup}}, nil, ""},
		{"tool calls beside text longer than the guard allows", &tasks.Result{Output: "Let me look that order up for you right away.",
			Message: &provider.Message{Role: "assistant", Content: provider.Text("Let me look that order up for you right away."), ToolCalls: []provider.ToolCall{lookup}}},
			&provider.Message{Role: "assistant", Content: provider.Text("Let me look that order up for you right away."), ToolCalls: []provider.ToolCall{lookup}}, nil, ""},
		{"a call of no route tool", &tasks.Result{Message: &provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{lookup, refund}}},
			nil, nil, ReasonSchema},
		{"final text", &tasks.Result{Output: "It ships today.", Message: &provider.Message{Role: "assistant", Content: provider.Text("It ships today.")}},
			nil, "It ships today.", ""},
		{"final text without a message", &tasks.Result{Output: "It ships today."}, nil, "It ships today.", ""},
		{"empty final text", &tasks.Result{Message: &provider.Message{Role: "assistant"}}, nil, nil, ReasonEmpty},
		{"final text too long", &tasks.Result{Output: "It ships today, or maybe tomorrow."}, nil, nil, ReasonSchema},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := r.judge(c.res)
			if diff := cmp.Diff(c.wantMsg, v.Message); diff != "" {
				t.Errorf("message mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantValue, v.Value); diff != "" {
				t.Errorf("value mismatch (-want +got):\n%s", diff)
			}
			if v.Reason != c.wantReason || (v.Err != nil) != (c.wantReason != "") {
				t.Errorf("reason, err = %q, %v, want %q", v.Reason, v.Err, c.wantReason)
			}
		})
	}
}
