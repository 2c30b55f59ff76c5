package server_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
)

// chatBody is a task body for model with extra top-level fields.
func chatBody(model string, messages []map[string]any, extra map[string]any) []byte {
	body := map[string]any{"model": model, "messages": messages}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	return b
}

func userText(s string) []map[string]any { return []map[string]any{{"role": "user", "content": s}} }

var weatherTool = []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}

// A request that its model cannot take, nor any model of its chain, is
// refused at admission: 400 with the capability's code naming the field,
// no provider call, no task, and the key still free.
func TestAdmissionRefusesWhatNoModelCanTake(t *testing.T) {
	t.Parallel()
	image := []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "what is this?"},
		{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.png"}}}}}
	toolLoop := []map[string]any{
		{"role": "user", "content": "weather in Paris?"},
		{"role": "assistant", "tool_calls": []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
	}
	schema := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": map[string]any{"type": "object"}}}
	cases := []struct {
		name        string
		body        []byte
		code, field string
	}{
		{"tools", chatBody("plain-model", userText("weather?"), map[string]any{"tools": weatherTool}), "model_lacks_tools", "tools"},
		{"a tool loop's history", chatBody("plain-model", toolLoop, nil), "model_lacks_tools", "messages[1].tool_calls"},
		{"an image", chatBody("plain-model", image, nil), "model_lacks_vision", "messages[0].content[1].image_url"},
		{"an image on a model without vision", chatBody("reasoning-model", image, nil), "model_lacks_vision", "messages[0].content[1].image_url"},
		{"json_schema", chatBody("plain-model", userText("hi"), map[string]any{"response_format": schema}), "model_lacks_json_schema", "response_format"},
		{"reasoning_effort", chatBody("test-model", userText("hi"), map[string]any{"reasoning_effort": "low"}), "model_lacks_reasoning", "reasoning_effort"},
		// small-backup's window is 50 tokens: 200 bytes are 50 tokens
		// plus 4 of framing, before any output.
		{"the asked model's context window", chatBody("small-backup", userText(strings.Repeat("x", 200)), map[string]any{"max_tokens": 10}),
			"context_window_exceeded", "messages"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			r := e.post(key, "k1", c.body, nil)
			if r.status != http.StatusBadRequest {
				t.Fatalf("POST: %d %s, want 400", r.status, r.body)
			}
			if code := r.problemCode(t); code != c.code {
				t.Errorf("code %q, want %q", code, c.code)
			}
			var p struct {
				Detail string `json:"detail"`
				Errors []struct {
					Field string `json:"field"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Errors) != 1 || p.Errors[0].Field != c.field {
				t.Errorf("errors %+v, want one naming %s", p.Errors, c.field)
			}
			if !strings.Contains(p.Detail, "model ") {
				t.Errorf("detail %q names no model", p.Detail)
			}
			// A context overflow says so in the words clients detect
			// (LangChain: OpenAI's and Anthropic's).
			if c.code == "context_window_exceeded" && (!strings.Contains(p.Detail, "maximum context length is 50 tokens") || !strings.Contains(p.Detail, "prompt is too long")) {
				t.Errorf("detail %q lacks the words clients detect a context overflow by", p.Detail)
			}
			e.checkNothingWritten()
			if r := e.post(key, "k1", taskBody("hello", 10), nil); r.status != http.StatusAccepted {
				t.Errorf("the key was used: a valid request under it got %d %s", r.status, r.body)
			}
		})
	}
}

// A chain skips the models that cannot take a request: chain-model (no
// tools) falls through small-backup (no tools either) to backup-model,
// which runs the task from its first attempt.
func TestChainSkipsModelsWithoutTheCapability(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 100_000_000)
	id := e.submit(key, "k", chatBody("chain-model", userText("weather?"), map[string]any{"tools": weatherTool, "max_tokens": 20}))
	task := e.waitFinished(key, id)
	if task.Status != "succeeded" || task.Result == nil || task.Result.Model != "backup-model" {
		t.Fatalf("task %s on %q, result %+v; want succeeded on backup-model", task.Status, task.Model, task.Result)
	}
	calls := e.fake.Calls()
	if len(calls) != 1 || calls[0].Model != "claude-test" {
		t.Errorf("provider calls %+v, want one to claude-test", calls)
	}
	// Reserved at backup-model's price, the dearest that can run it.
	var reserved int64
	if err := e.pool.QueryRow(t.Context(), `SELECT amount_micros FROM budget_reservations WHERE task_id = $1`, id).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved < 20*4 {
		t.Errorf("reserved %d micros, less than backup-model's output price for 20 tokens", reserved)
	}
	e.checkInvariants()
}

// The usage classes of settled tasks reach GET /v1/usage and the CSV,
// which agree with the rows, and every row keeps its classes within its
// totals.
func TestUsageReportsTheClasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	finance := e.owner("books", accounts.RoleFinance, 0)
	ctx := t.Context()
	if _, err := e.budgets.Set(ctx, "acme", 1_000_000); err != nil {
		t.Fatal(err)
	}
	// Settled as the worker settles a call whose provider reported
	// classes: the adapters' part is theirs to test.
	for _, s := range []budget.Settlement{
		{Model: "test-model", InputTokens: 1000, OutputTokens: 300, CachedInputTokens: 600, CacheWriteTokens: 100, ReasoningTokens: 200, CostMicros: 1300},
		{Model: "backup-model", InputTokens: 50, OutputTokens: 10, CacheWriteTokens: 50, CostMicros: 190},
		{Model: "test-model", InputTokens: 6, OutputTokens: 3, CostMicros: 12},
	} {
		s.TaskID, s.Source = uuid.NewString(), budget.SourceReported
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			budget.QueueReserve(b, budget.Reservation{TaskID: s.TaskID, OwnerID: "acme", Amount: 5000, At: time.Now()})
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			_, err := budget.SettleTx(ctx, tx, s, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := e.do(http.MethodGet, "/v1/usage?group_by=model", finance, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("usage: %d %s", r.status, r.body)
	}
	var rep struct {
		Rows []struct {
			TaskID            string `json:"task_id"`
			CachedInputTokens int64  `json:"cached_input_tokens"`
			CacheWriteTokens  int64  `json:"cache_write_tokens"`
			ReasoningTokens   int64  `json:"reasoning_tokens"`
		} `json:"rows"`
		Groups []struct {
			Model             string `json:"model"`
			CachedInputTokens int64  `json:"cached_input_tokens"`
			CacheWriteTokens  int64  `json:"cache_write_tokens"`
			ReasoningTokens   int64  `json:"reasoning_tokens"`
		} `json:"groups"`
		Totals struct {
			CachedInputTokens int64 `json:"cached_input_tokens"`
			CacheWriteTokens  int64 `json:"cache_write_tokens"`
			ReasoningTokens   int64 `json:"reasoning_tokens"`
			CostMicros        int64 `json:"cost_micros"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Totals.CachedInputTokens != 600 || rep.Totals.CacheWriteTokens != 150 || rep.Totals.ReasoningTokens != 200 || rep.Totals.CostMicros != 1502 {
		t.Errorf("totals %+v", rep.Totals)
	}
	if len(rep.Rows) != 3 || rep.Rows[0].CachedInputTokens != 600 || rep.Rows[1].CacheWriteTokens != 50 || rep.Rows[2].ReasoningTokens != 0 {
		t.Errorf("rows %+v", rep.Rows)
	}
	for _, g := range rep.Groups {
		if g.Model == "backup-model" && (g.CacheWriteTokens != 50 || g.CachedInputTokens != 0) {
			t.Errorf("backup-model's group %+v", g)
		}
	}

	res := e.do(http.MethodGet, "/v1/usage.csv", finance, nil, nil)
	records, err := csv.NewReader(bytes.NewReader(res.body)).ReadAll()
	if err != nil || res.status != http.StatusOK {
		t.Fatalf("csv: %d %v", res.status, err)
	}
	head := strings.Join(records[0], ",")
	if !strings.HasSuffix(head, ",cost,charged,cached_input_tokens,cache_write_tokens,reasoning_tokens") {
		t.Fatalf("CSV header %s", head)
	}
	var sums [3]int64
	for _, rec := range records[1:] {
		for i := range sums {
			n, err := strconv.ParseInt(rec[13+i], 10, 64)
			if err != nil {
				t.Fatalf("row %v: %v", rec, err)
			}
			sums[i] += n
		}
	}
	if sums != [3]int64{600, 150, 200} {
		t.Errorf("CSV classes sum to %v, the report's totals are 600, 150, 200", sums)
	}
	if n := e.scalar(`SELECT count(*) FROM usage_records
		WHERE cached_input_tokens < 0 OR cache_write_tokens < 0 OR reasoning_tokens < 0
		   OR cached_input_tokens + cache_write_tokens > input_tokens OR reasoning_tokens > output_tokens`); n != 0 {
		t.Errorf("%d usage rows with classes outside their totals", n)
	}
	e.checkInvariants()
}
