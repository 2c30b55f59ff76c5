package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

func respParams(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           testModel,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		MaxOutputTokens: openai.Int(16),
	}
}

// respWeatherTool is a function tool in Responses' flat shape.
func respWeatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:        "get_weather",
		Description: openai.String("The weather in a city."),
		Parameters: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}}},
		Strict: openai.Bool(true),
	}}
}

// sentMessages is the messages of the provider call i the fake received.
func sentMessages(t *testing.T, e *env, i int) []map[string]any {
	t.Helper()
	calls := e.fake.Calls()
	if len(calls) <= i {
		t.Fatalf("provider calls = %d, want more than %d", len(calls), i)
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(calls[i].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

func roles(msgs []map[string]any) string {
	var rs []string
	for _, m := range msgs {
		rs = append(rs, m["role"].(string))
	}
	return strings.Join(rs, ",")
}

func TestResponsesStringInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()

	params := respParams("hello there")
	params.Instructions = openai.String("Answer briefly.")
	params.Metadata = map[string]string{"ticket": "T-1"}
	var res *http.Response
	got, err := client.Responses.New(ctx, params, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	taskID := res.Header.Get("X-Tollgate-Task-Id")
	if got.ID != "resp_"+strings.ReplaceAll(taskID, "-", "") || got.Status != responses.ResponseStatusCompleted {
		t.Errorf("id %q status %q, want resp_ + task %s, completed", got.ID, got.Status, taskID)
	}
	if !strings.HasPrefix(got.OutputText(), "fake completion ") || got.Usage.TotalTokens == 0 || got.Usage.OutputTokens == 0 {
		t.Errorf("output %q usage %+v", got.OutputText(), got.Usage)
	}
	if got.Instructions.OfString != "Answer briefly." || got.Metadata["ticket"] != "T-1" || got.MaxOutputTokens != 16 {
		t.Errorf("echoed parameters: instructions %q metadata %v max_output_tokens %d", got.Instructions.OfString, got.Metadata, got.MaxOutputTokens)
	}
	msgs := sentMessages(t, e, 0)
	if roles(msgs) != "system,user" || msgs[0]["content"] != "Answer briefly." || msgs[1]["content"] != "hello there" {
		t.Errorf("provider messages = %v, want the instructions then the input", msgs)
	}
	var call struct {
		MaxCompletionTokens int `json:"max_completion_tokens"`
	}
	_ = json.Unmarshal(e.fake.Calls()[0].Body, &call)
	if call.MaxCompletionTokens != 16 {
		t.Errorf("max_completion_tokens sent = %d, want 16 (max_output_tokens)", call.MaxCompletionTokens)
	}

	again, err := client.Responses.Get(ctx, got.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if again.OutputText() != got.OutputText() || again.Status != got.Status || again.Usage.TotalTokens != got.Usage.TotalTokens {
		t.Errorf("GET = %q %s, want %q %s", again.OutputText(), again.Status, got.OutputText(), got.Status)
	}
}

func TestResponsesIncompleteAtTheOutputLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	e.fake.Script(fake.Scripted{FinishReason: "length"})
	got, err := client.Responses.New(context.Background(), respParams("long story"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseStatusIncomplete || got.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("status %q incomplete_details %+v, want incomplete max_output_tokens", got.Status, got.IncompleteDetails)
	}
}

func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()

	params := respParams("weather in Paris?")
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	first, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("output = %+v, want one function_call", first.Output)
	}
	fc := first.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.CallID == "" || !strings.Contains(fc.Arguments, `"city"`) {
		t.Errorf("function call = %+v", fc)
	}
	sentTools := struct {
		Tools []map[string]any `json:"tools"`
	}{}
	_ = json.Unmarshal(e.fake.Calls()[0].Body, &sentTools)
	if fn, _ := sentTools.Tools[0]["function"].(map[string]any); fn["name"] != "get_weather" || fn["strict"] != true {
		t.Errorf("tool sent = %v, want the chat form of get_weather, strict", sentTools.Tools)
	}

	// The whole conversation sent back as items.
	output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp_c": 21}`)
	output.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser),
		{OfFunctionCall: new(fc.ToParam())},
		output,
	}}
	second, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != responses.ResponseStatusCompleted || second.OutputText() == "" {
		t.Errorf("second turn: %s %q, want completed text", second.Status, second.OutputText())
	}
	msgs := sentMessages(t, e, 1)
	if roles(msgs) != "user,assistant,tool" || msgs[2]["tool_call_id"] != fc.CallID || msgs[2]["content"] != `{"temp_c": 21}` {
		t.Errorf("provider messages = %v, want user, assistant with the call, tool result", msgs)
	}

	// The same turn by previous_response_id: only the result is new.
	third, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: testModel, PreviousResponseID: openai.String(first.ID),
		Tools: params.Tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}})
	if err != nil {
		t.Fatal(err)
	}
	if third.OutputText() != second.OutputText() || third.PreviousResponseID != first.ID {
		t.Errorf("continued turn: %q (previous %q), want %q (previous %q)", third.OutputText(), third.PreviousResponseID, second.OutputText(), first.ID)
	}
}

func TestResponsesPreviousResponseID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	other := e.owner("globex", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	otherClient, _ := sdk(e, other)
	ctx := context.Background()

	p := respParams("my name is Ada")
	p.Instructions = openai.String("Be terse.")
	first, err := client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	next := respParams("what is my name?")
	next.PreviousResponseID = openai.String(first.ID)
	next.Instructions = openai.String("Be kind.")
	if _, err := client.Responses.New(ctx, next); err != nil {
		t.Fatal(err)
	}
	msgs := sentMessages(t, e, 1)
	want := []string{"Be kind.", "my name is Ada", first.OutputText(), "what is my name?"}
	if roles(msgs) != "system,user,assistant,user" {
		t.Fatalf("provider roles = %s, want system,user,assistant,user", roles(msgs))
	}
	for i, w := range want {
		if msgs[i]["content"] != w {
			t.Errorf("message %d = %v, want %q (the earlier instructions are not carried over)", i, msgs[i]["content"], w)
		}
	}

	// Another owner's response is not found, and nothing is called.
	calls := e.fake.CallCount()
	_, err = otherClient.Responses.New(ctx, next)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Param != "previous_response_id" {
		t.Errorf("another owner's previous_response_id: %v, want 404 naming previous_response_id", err)
	}
	if _, err := otherClient.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("GET of another owner's response: %v, want 404", err)
	}
	// A response created with store: false cannot be continued.
	unstored := respParams("forget me")
	unstored.Store = openai.Bool(false)
	gone, err := client.Responses.New(ctx, unstored)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gone.RawJSON(), `"store":false`) {
		t.Error("store: false echoed as true")
	}
	calls++
	cont := respParams("and then?")
	cont.PreviousResponseID = openai.String(gone.ID)
	if _, err := client.Responses.New(ctx, cont); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "previous_response_id" {
		t.Errorf("continuing a store: false response: %v, want 400 naming previous_response_id", err)
	}
	if n := e.fake.CallCount(); n != calls {
		t.Errorf("provider calls = %d, want %d: refused continuations call nothing", n, calls)
	}
}

// streamEvents reads a Responses stream to its end.
func streamEvents(t *testing.T, next func() bool, current func() responses.ResponseStreamEventUnion, errf func() error) []responses.ResponseStreamEventUnion {
	t.Helper()
	var events []responses.ResponseStreamEventUnion
	for next() {
		events = append(events, current())
	}
	if err := errf(); err != nil {
		t.Fatal(err)
	}
	return events
}

// checkSequence fails unless the events are numbered from first on
// without a gap and end with the final response event.
func checkSequence(t *testing.T, events []responses.ResponseStreamEventUnion, first int64) responses.Response {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	for i, ev := range events {
		if ev.SequenceNumber != first+int64(i) {
			t.Fatalf("event %d (%s) numbered %d, want %d", i, ev.Type, ev.SequenceNumber, first+int64(i))
		}
	}
	last := events[len(events)-1]
	if last.Type != "response.completed" {
		t.Fatalf("last event %s, want response.completed", last.Type)
	}
	return last.Response
}

func TestResponsesStreamingText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	s := client.Responses.NewStreaming(context.Background(), respParams("stream me"))
	events := streamEvents(t, s.Next, s.Current, s.Err)
	final := checkSequence(t, events, 0)
	var types []string
	var text strings.Builder
	for _, ev := range events {
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[2] != "response.output_item.added" || types[3] != "response.content_part.added" {
		t.Errorf("events begin %v", types[:4])
	}
	if strings.Count(strings.Join(types, " "), "response.output_text.delta") < 2 {
		t.Errorf("events %v: want the provider's deltas relayed one by one", types)
	}
	if text.String() != final.OutputText() || final.OutputText() == "" || final.Usage.TotalTokens == 0 {
		t.Errorf("deltas %q, final %q usage %+v", text.String(), final.OutputText(), final.Usage)
	}
	again, err := client.Responses.Get(context.Background(), final.ID, responses.ResponseGetParams{})
	if err != nil || again.OutputText() != final.OutputText() {
		t.Errorf("GET after the stream: %v %q, want %q", err, again.OutputText(), final.OutputText())
	}
}

func TestResponsesStreamingToolCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	params := respParams("weather in Oslo?")
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	s := client.Responses.NewStreaming(context.Background(), params)
	events := streamEvents(t, s.Next, s.Current, s.Err)
	final := checkSequence(t, events, 0)
	var args strings.Builder
	var done string
	for _, ev := range events {
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			done = ev.Arguments
		}
	}
	if len(final.Output) != 1 {
		t.Fatalf("final output %+v, want one function call", final.Output)
	}
	fc := final.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || args.String() != fc.Arguments || done != fc.Arguments || !strings.Contains(done, "city") {
		t.Errorf("argument deltas %q, done %q, final call %+v", args.String(), done, fc)
	}
}

// pollResponse gets the response until it is no longer queued or in
// progress.
func pollResponse(t *testing.T, client openai.Client, id string) *responses.Response {
	t.Helper()
	var got *responses.Response
	eventually.Wait(t, "response "+id+" finished", func() bool {
		var err error
		if got, err = client.Responses.Get(context.Background(), id, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
		return got.Status != responses.ResponseStatusQueued && got.Status != responses.ResponseStatusInProgress
	})
	return got
}

func TestResponsesBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()

	sync, err := client.Responses.New(ctx, respParams("background please"))
	if err != nil {
		t.Fatal(err)
	}
	params := respParams("background please")
	params.Background = openai.Bool(true)
	started, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !started.Background || started.Status != responses.ResponseStatusQueued {
		t.Errorf("background answer: status %q background %v, want queued", started.Status, started.Background)
	}
	done := pollResponse(t, client, started.ID)
	if done.Status != responses.ResponseStatusCompleted || done.OutputText() != sync.OutputText() || done.Usage.TotalTokens != sync.Usage.TotalTokens {
		t.Errorf("background result %s %q, want completed %q as the synchronous one", done.Status, done.OutputText(), sync.OutputText())
	}

	// The stored stream, whole and resumed: the same numbers each time.
	s := client.Responses.GetStreaming(ctx, started.ID, responses.ResponseGetParams{})
	whole := streamEvents(t, s.Next, s.Current, s.Err)
	if final := checkSequence(t, whole, 0); final.OutputText() != sync.OutputText() {
		t.Errorf("stored stream final %q, want %q", final.OutputText(), sync.OutputText())
	}
	s = client.Responses.GetStreaming(ctx, started.ID, responses.ResponseGetParams{StartingAfter: openai.Int(3)})
	resumed := streamEvents(t, s.Next, s.Current, s.Err)
	checkSequence(t, resumed, 4)
	if len(resumed) != len(whole)-4 || resumed[0].Type != whole[4].Type || resumed[0].Delta != whole[4].Delta {
		t.Errorf("resumed after 3: %d events from %s, want %d from %s", len(resumed), resumed[0].Type, len(whole)-4, whole[4].Type)
	}

	// Background and stream together: the stored sequence as it goes.
	params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("background stream")}
	bs := client.Responses.NewStreaming(ctx, params)
	events := streamEvents(t, bs.Next, bs.Current, bs.Err)
	final := checkSequence(t, events, 0)
	if events[0].Response.Status != responses.ResponseStatusQueued || final.OutputText() == "" {
		t.Errorf("background stream: first status %q, final %q", events[0].Response.Status, final.OutputText())
	}
}

// A background response admitted by an instance that runs no workers
// (one that died after admitting it) is run by another instance on the
// same database.
func TestResponsesBackgroundSurvivesTheAdmittingInstance(t *testing.T) {
	t.Parallel()
	admitting := newEnv(t, envOptions{noWorkers: true})
	key := admitting.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(admitting, key)
	params := respParams("outlive me")
	params.Background = openai.Bool(true)
	started, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if started.Status != responses.ResponseStatusQueued {
		t.Fatalf("status %q, want queued on an instance without workers", started.Status)
	}
	other := restartWorkers(t, admitting)
	otherClient, _ := sdk(other, key)
	done := pollResponse(t, otherClient, started.ID)
	if done.Status != responses.ResponseStatusCompleted || done.OutputText() == "" {
		t.Errorf("after the other instance ran it: %s %q, want completed", done.Status, done.OutputText())
	}
	if n := other.fake.CallCount(); n != 1 {
		t.Errorf("calls on the instance that ran it = %d, want 1", n)
	}
}

func TestResponsesCancelSlowBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{requestTimeout: 2 * time.Second})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	e.fake.Script(fake.Scripted{Hang: true})
	params := respParams("take your time")
	params.Background = openai.Bool(true)
	started, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the call reached the provider", func() bool { return e.fake.CallCount() == 1 })

	cancelled, err := client.Responses.Cancel(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.Responses.Cancel(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != responses.ResponseStatusCancelled || again.Status != responses.ResponseStatusCancelled {
		t.Errorf("cancel answered %q then %q, want cancelled twice", cancelled.Status, again.Status)
	}
	taskID := responseTaskID(t, started.ID)
	task := e.waitFinished(key, taskID)
	if task.Status != tasks.StatusCanceled {
		t.Errorf("task status %s, want canceled", task.Status)
	}
	if got := pollResponse(t, client, started.ID); got.Status != responses.ResponseStatusCancelled || len(got.Output) != 0 {
		t.Errorf("GET after cancel: %s with %d items, want cancelled without output", got.Status, len(got.Output))
	}
	e.checkInvariants()

	// A completed response cannot be cancelled.
	done, err := client.Responses.New(ctx, respParams("quick"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Cancel(ctx, done.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("cancel of a completed response: %v, want 400", err)
	}
}

// responseTaskID is the task id a response id names.
func responseTaskID(t *testing.T, id string) string {
	t.Helper()
	hex := strings.TrimPrefix(id, "resp_")
	if len(hex) != 32 {
		t.Fatalf("response id %q", id)
	}
	return hex[:8] + "-" + hex[8:12] + "-" + hex[12:16] + "-" + hex[16:20] + "-" + hex[20:]
}

func TestResponsesDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	other := e.owner("globex", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	otherClient, _ := sdk(e, other)
	ctx := context.Background()
	got, err := client.Responses.New(ctx, respParams("delete me"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if err := otherClient.Responses.Delete(ctx, got.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("another owner's DELETE: %v, want 404", err)
	}
	if err := client.Responses.Delete(ctx, got.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE id = $1 AND bodies_erased_at IS NOT NULL AND payload IS NULL`, responseTaskID(t, got.ID)); n != 1 {
		t.Errorf("erased tasks = %d, want 1", n)
	}
	if _, err := client.Responses.Get(ctx, got.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("GET after DELETE: %v, want 404", err)
	}
	if err := client.Responses.Delete(ctx, got.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("second DELETE: %v, want 404", err)
	}
	cont := respParams("more")
	cont.PreviousResponseID = openai.String(got.ID)
	if _, err := client.Responses.New(ctx, cont); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("continuing a deleted response: %v, want 404", err)
	}
}

// Every field a Responses request carries reaches the provider under its
// chat name, and the response echoes it.
func TestResponsesCarriesItsFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	params := respParams("list one city")
	params.Model = "agent-model"
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsNone)}
	params.ParallelToolCalls = openai.Bool(false)
	params.Temperature, params.TopP = openai.Float(0.5), openai.Float(0.9)
	params.User, params.SafetyIdentifier = openai.String("u-1"), openai.String("s-1")
	params.ServiceTier = responses.ResponseNewParamsServiceTierFlex
	params.Reasoning.Effort = "low"
	params.Text = responses.ResponseTextConfigParam{Verbosity: responses.ResponseTextConfigVerbosityLow,
		Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "city", Strict: openai.Bool(true), Schema: map[string]any{"type": "object", "additionalProperties": false,
				"required": []string{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}
	got, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	if err := json.Unmarshal(e.fake.Calls()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	format, _ := sent["response_format"].(map[string]any)
	schema, _ := format["json_schema"].(map[string]any)
	want := map[string]any{"tool_choice": "none", "parallel_tool_calls": false, "temperature": 0.5, "top_p": 0.9,
		"user": "u-1", "safety_identifier": "s-1", "service_tier": "flex", "reasoning_effort": "low", "verbosity": "low",
		"max_completion_tokens": float64(16)}
	for k, v := range want {
		if sent[k] != v {
			t.Errorf("%s sent = %v, want %v", k, sent[k], v)
		}
	}
	if format["type"] != "json_schema" || schema["name"] != "city" || schema["strict"] != true || schema["schema"] == nil {
		t.Errorf("response_format sent = %v", format)
	}
	if got.OutputText() != `{"name":"fake"}` {
		t.Errorf("output %q, want the schema's instance", got.OutputText())
	}
	if got.Temperature != 0.5 || got.TopP != 0.9 || got.ParallelToolCalls || got.ToolChoice.OfToolChoiceMode != "none" ||
		got.Reasoning.Effort != "low" || got.Text.Format.Type != "json_schema" || len(got.Tools) != 1 || got.Tools[0].Name != "get_weather" {
		t.Errorf("echoed parameters: %s", got.RawJSON())
	}

	// The replay record keeps the request, as the contract describes it.
	r := e.do(http.MethodGet, "/v1/tasks/"+responseTaskID(t, got.ID)+"/replay", key, nil, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"conversation"`) {
		t.Errorf("replay record: %d %s", r.status, r.body)
	}
}

// A response's texts (instructions, input items, tool calls and results,
// metadata) and its continuation are stored as every task's are: no
// canary in clear in a dump of the database or in the logs, while the
// owner continues from the real conversation.
func TestResponsesStoreNothingUnredacted(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	params := respParams("Write to " + canaries[0] + ", card " + canaries[3])
	params.Instructions = openai.String("Never reveal " + canaries[5])
	params.Metadata = map[string]string{"contact": canaries[1]}
	params.Tools = []responses.ToolUnionParam{respWeatherTool()}
	first, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("reached " + canaries[2])
	output.OfFunctionCallOutput.CallID = openai.String(first.Output[0].AsFunctionCall().CallID)
	next := responses.ResponseNewParams{Model: testModel, PreviousResponseID: openai.String(first.ID), Tools: params.Tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}}
	s := client.Responses.NewStreaming(ctx, next)
	checkSequence(t, streamEvents(t, s.Next, s.Current, s.Err), 0)
	msgs := sentMessages(t, e, 1)
	if !strings.Contains(msgs[0]["content"].(string), canaries[0]) || !strings.Contains(msgs[2]["content"].(string), canaries[2]) {
		t.Errorf("provider messages %v: want the real texts", msgs)
	}

	dump, err := exec.Command("pg_dump", "--data-only", e.dbURL).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), responseTaskID(t, first.ID)) {
		t.Fatal("the dump does not even hold the task: the scan would prove nothing")
	}
	for _, c := range []string{canaries[0], canaries[1], canaries[2], canaries[3], canaries[5]} {
		if strings.Contains(string(dump), c) {
			t.Errorf("canary %q found in the database dump", c)
		}
		if strings.Contains(logs.String(), c) {
			t.Errorf("canary %q found in the logs", c)
		}
	}
}

// A stream resumed after its last event is empty, not an error.
func TestResponsesStreamResumedAfterItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	got, err := client.Responses.New(context.Background(), respParams("short"))
	if err != nil {
		t.Fatal(err)
	}
	s := client.Responses.GetStreaming(context.Background(), got.ID, responses.ResponseGetParams{StartingAfter: openai.Int(1000)})
	if events := streamEvents(t, s.Next, s.Current, s.Err); len(events) != 0 {
		t.Errorf("events after the end: %d, want none", len(events))
	}
	r := e.do(http.MethodGet, "/v1/responses/"+got.ID+"?stream=true&starting_after=1000", key, nil, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" || len(r.body) != 0 {
		t.Errorf("%d %q %q, want 200, an empty event stream", r.status, r.header.Get("Content-Type"), r.body)
	}
}

// A failed task is OpenAI's error when waited for, and a failed response
// when retrieved or streamed from the background.
func TestResponsesFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	tooLong := fake.Scripted{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8 tokens.",` +
		`"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}

	e.fake.Script(tooLong)
	_, err := client.Responses.New(ctx, respParams("far too long"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "context_length_exceeded" || apiErr.Param != "input" {
		t.Errorf("synchronous failure: %v, want 400 context_length_exceeded naming input", err)
	}

	e.fake.Script(tooLong)
	params := respParams("far too long, later")
	params.Background = openai.Bool(true)
	started, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	got := pollResponse(t, client, started.ID)
	if got.Status != responses.ResponseStatusFailed || got.Error.Code != "context_length_exceeded" || got.Error.Message == "" || len(got.Output) != 0 {
		t.Errorf("background failure: %s %+v, want failed with the error", got.Status, got.Error)
	}
	s := client.Responses.GetStreaming(ctx, started.ID, responses.ResponseGetParams{})
	events := streamEvents(t, s.Next, s.Current, s.Err)
	last := events[len(events)-1]
	if last.Type != "response.failed" || last.Response.Status != responses.ResponseStatusFailed || last.Response.Error.Code != "context_length_exceeded" {
		t.Errorf("stream of a failed response ends with %s %s %+v", last.Type, last.Response.Status, last.Response.Error)
	}
}

func TestResponsesIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	idem := option.WithHeader("Idempotency-Key", "r1")
	first, err := client.Responses.New(ctx, respParams("once"), idem)
	if err != nil {
		t.Fatal(err)
	}
	var res *http.Response
	second, err := client.Responses.New(ctx, respParams("once"), idem, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID || second.OutputText() != first.OutputText() || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %s %q (replayed %q), want %s %q", second.ID, second.OutputText(), res.Header.Get("Idempotent-Replayed"), first.ID, first.OutputText())
	}
	// Streamed under the same key: the stored answer as a stream.
	s := client.Responses.NewStreaming(ctx, respParams("once"), idem)
	if final := checkSequence(t, streamEvents(t, s.Next, s.Current, s.Err), 0); final.ID != first.ID || final.OutputText() != first.OutputText() {
		t.Errorf("streamed replay: %s %q", final.ID, final.OutputText())
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	_, err = client.Responses.New(ctx, respParams("changed"), idem)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("changed body under the same key: %v, want 422", err)
	}
}
