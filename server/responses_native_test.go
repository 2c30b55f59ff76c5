package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

// codexTools are a coding agent's tools beyond the function tool the
// SDK builds: a namespace of tools and a hosted web search.
const codexTools = `[{"type":"function","name":"exec_command","description":"Run a command.","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}},` +
	`{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"close_agent","strict":false,"parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}]},` +
	`{"type":"web_search","external_web_access":true}]`

// codexParams is a Codex-like first turn: developer and user messages of
// input_text parts, encrypted reasoning asked for, nothing stored.
func codexParams() responses.ResponseNewParams {
	text := func(role responses.EasyInputMessageRole, s string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{Role: role,
			Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: responses.ResponseInputMessageContentListParam{
				{OfInputText: &responses.ResponseInputTextParam{Text: s}}}}}}
	}
	return responses.ResponseNewParams{
		Model: "agent-model",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			text(responses.EasyInputMessageRoleDeveloper, "You are a coding agent. Use <tools> & be precise."),
			text(responses.EasyInputMessageRoleUser, "List the files."),
		}},
		Store:             openai.Bool(false),
		Include:           []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		ToolChoice:        responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsAuto)},
		ParallelToolCalls: openai.Bool(false),
		PromptCacheKey:    openai.String("01a25363-b864"),
	}
}

// codexOptions add what the SDK has no field for, as raw JSON.
func codexOptions(sent *[]byte) []option.RequestOption {
	return []option.RequestOption{
		option.WithJSONSet("tools", json.RawMessage(codexTools)),
		option.WithJSONSet("reasoning", map[string]any{"summary": "auto"}),
		option.WithJSONSet("client_metadata", map[string]any{"originator": "codex_exec", "turn": 1}),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			if r.Body != nil {
				b, _ := io.ReadAll(r.Body)
				*sent = b
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			return next(r)
		}),
	}
}

// asForwarded is what the provider must receive for a client's body:
// the same bytes, stream and background taken out, model the provider's
// name, stream how Tollgate reads the answer, and the default output limit
// when the body sets none.
func asForwarded(t *testing.T, body []byte, model string, stream bool) string {
	t.Helper()
	b, err := provider.SpliceMember(body, "stream", nil)
	if err == nil {
		b, err = provider.SpliceMember(b, "background", nil)
	}
	if err == nil {
		b, err = provider.SpliceMember(b, "model", []byte(`"`+model+`"`))
	}
	flag := []byte("false")
	if stream {
		flag = []byte("true")
	}
	if err == nil {
		b, err = provider.SpliceMember(b, "stream", flag)
	}
	var limit struct {
		MaxOutputTokens *int `json:"max_output_tokens"`
	}
	if err == nil {
		err = json.Unmarshal(body, &limit)
	}
	if err == nil && limit.MaxOutputTokens == nil {
		// The output limit the reservation is made for: the service's
		// default (tasks.Config.DefaultMaxTokens), when the client set none.
		b, err = provider.SpliceMember(b, "max_output_tokens", []byte("1024"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResponsesNativeCodexLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	e.fake.Script(fake.Scripted{Tool: "exec_command", CachedTokens: 40, ReasoningTokens: 12})

	// Turn 1, streamed: the body reaches the provider as sent, and its
	// events come back as it sent them.
	var sent []byte
	s := client.Responses.NewStreaming(ctx, codexParams(), codexOptions(&sent)...)
	var types []string
	var items []json.RawMessage
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.output_item.done" {
			items = append(items, json.RawMessage(ev.Item.RawJSON()))
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("provider calls = %d, want 1", len(calls))
	}
	if got, want := string(calls[0].Body), asForwarded(t, sent, "agent-model", true); got != want {
		t.Errorf("the provider got:\n%s\nwant the client's bytes, model, stream and the output limit set:\n%s", got, want)
	}
	if len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("events %v, want the provider's, response.created to response.completed", types)
	}
	if len(items) != 2 || !strings.Contains(string(items[0]), `"encrypted_content":"fake-encrypted-`) || !strings.Contains(string(items[1]), `"function_call"`) {
		t.Fatalf("output items %s, want the reasoning item with its encrypted content, then the call", items)
	}
	var fc struct {
		CallID string `json:"call_id"`
	}
	_ = json.Unmarshal(items[1], &fc)

	// Turn 2: the reasoning item and the call passed back, with the
	// call's output, reach the provider unchanged.
	var first map[string]json.RawMessage
	_ = json.Unmarshal(sent, &first)
	var input []json.RawMessage
	_ = json.Unmarshal(first["input"], &input)
	input = append(input, items...)
	input = append(input, json.RawMessage(`{"type":"function_call_output","call_id":"`+fc.CallID+`","output":"README.md\nmain.go"}`))
	inputJSON, _ := json.Marshal(input)
	next, _ := provider.SpliceMember(sent, "input", inputJSON)
	next, _ = provider.SpliceMember(next, "stream", []byte("false"))
	e.fake.Script(fake.Scripted{CachedTokens: 64, ReasoningTokens: 8})
	idem := map[string]string{"Idempotency-Key": "codex-turn-2"}
	r := e.do(http.MethodPost, "/v1/responses", key, next, idem)
	if r.status != http.StatusOK {
		t.Fatalf("turn 2: %d %s", r.status, r.body)
	}
	calls = e.fake.Calls()
	if got, want := string(calls[1].Body), asForwarded(t, next, "agent-model", false); got != want {
		t.Errorf("turn 2 reached the provider as:\n%s\nwant:\n%s", got, want)
	}
	var answer struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
		Usage  struct {
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &answer); err != nil || len(answer.Output) != 2 || answer.Usage.InputTokensDetails.CachedTokens != 64 ||
		!strings.Contains(string(answer.Output[0]), `"reasoning"`) || !strings.Contains(string(answer.Output[1]), "fake completion") {
		t.Errorf("turn 2 answer %s, want the provider's Response: reasoning, then the text", r.body)
	}

	// The same request under the same key: the same bytes, no call.
	again := e.do(http.MethodPost, "/v1/responses", key, next, idem)
	if again.status != http.StatusOK || !bytes.Equal(again.body, r.body) {
		t.Errorf("replay: %d %s\nwant the first answer's bytes %s", again.status, again.body, r.body)
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Errorf("provider calls = %d, want 2", n)
	}

	// Settled on the provider's usage, classes included.
	cached := e.scalar(`SELECT coalesce(sum((result->'usage'->>'cached_input_tokens')::bigint), 0) FROM tasks`)
	reasoning := e.scalar(`SELECT coalesce(sum((result->'usage'->>'reasoning_tokens')::bigint), 0) FROM tasks`)
	if cached != 40+64 || reasoning != 12+8 {
		t.Errorf("usage recorded: cached %d reasoning %d, want %d and %d", cached, reasoning, 40+64, 12+8)
	}
	e.checkInvariants()
}

func TestResponsesNativeRefusedForAnotherKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000_000)
	client, _ := sdk(e, key)
	params := codexParams()
	params.Model = "backup-model" // an Anthropic-kind provider
	var sent []byte
	_, err := client.Responses.New(context.Background(), params, codexOptions(&sent)...)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "client_metadata" ||
		!strings.Contains(apiErr.Message, "anthropic") {
		t.Fatalf("err = %v, want 400 naming client_metadata and the provider kind", err)
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Errorf("provider calls = %d, want 0", n)
	}
	e.checkNothingWritten()
}

// A request chat can say still goes as a chat completion.
func TestResponsesNativeOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	if _, err := client.Responses.New(context.Background(), respParams("plain")); err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(e.fake.Calls()[0].Body, &body)
	if _, ok := body["messages"]; !ok {
		t.Errorf("a plain request reached the provider as %s, want a chat completion", e.fake.Calls()[0].Body)
	}
}

// previous_response_id is Tollgate's conversation: it cannot hold what
// only the provider's API carries.
func TestResponsesNativeRefusesPrevious(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.do(http.MethodPost, "/v1/responses", key, []byte(`{"model":"test-model","input":"hi","include":["reasoning.encrypted_content"],"previous_response_id":"resp_0123456789abcdef0123456789abcdef"}`), nil)
	_, param := oaiEnvelope(t, r)
	if r.status != http.StatusBadRequest || param == nil || *param != "previous_response_id" || !strings.Contains(string(r.body), "include") {
		t.Errorf("%d %s, want 400 naming previous_response_id and include", r.status, r.body)
	}
	e.checkNothingWritten()
}
