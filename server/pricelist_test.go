package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
)

// testPriceList prices a name the test catalog does not have
// (gpt-4o-mini) and one it has (test-model, whose catalog prices win over
// the list's).
const testPriceList = `{
	"sample_spec": {"mode": "documentation"},
	"gpt-4o-mini": {"input_cost_per_token": 1.5e-07, "output_cost_per_token": "0.0000006", "cache_read_input_token_cost": 7.5e-08,
		"litellm_provider": "openai", "mode": "chat", "max_input_tokens": 128000, "max_output_tokens": 16384,
		"supports_function_calling": true, "supports_vision": true, "supports_response_schema": true},
	"text-embedding-3-small": {"input_cost_per_token": 2e-08, "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "embedding"},
	"test-model": {"input_cost_per_token": 9e-06, "output_cost_per_token": 9e-06, "cache_read_input_token_cost": "0.0000001",
		"litellm_provider": "openai", "mode": "chat"}
}`

// A settled task is charged by the list's prices: every usage class of a
// name only the list has, and the classes a catalog model leaves unpriced
// (its own input and output prices winning). Neither is estimated.
func TestPriceListPricesSettledTasks(t *testing.T) {
	t.Parallel()
	// 1000 prompt tokens, 400 of them cached, 2000 completion tokens.
	const usage = `{"prompt_tokens":1000,"completion_tokens":2000,"total_tokens":3000,"prompt_tokens_details":{"cached_tokens":400}}`
	cases := []struct {
		model string
		want  int64
	}{
		// 600×0.15 + 400×0.075 + 2000×0.6 micros.
		{"gpt-4o-mini", 90 + 30 + 1200},
		// The catalog's 1 and 2 units per million, the list's 0.1 for
		// cached input: 600×1 + 400×0.1 + 2000×2 micros.
		{"test-model", 600 + 40 + 4000},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{priceList: testPriceList})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			e.fake.Script(openAIAnswer(usage))
			body, _ := json.Marshal(map[string]any{"model": c.model, "max_tokens": 3000,
				"messages": []map[string]string{{"role": "user", "content": "hello"}}})
			r := e.post(key, "k", body, map[string]string{"Prefer": "wait=30"})
			if r.status != http.StatusOK && r.status != http.StatusAccepted {
				t.Fatalf("POST: %d %s", r.status, r.body)
			}
			task := e.waitFinished(key, r.task(t).ID)
			if task.Status != "succeeded" {
				t.Fatalf("task %s, want succeeded", task.Status)
			}
			e.expectScalars([]scalarCheck{
				{"charged", `SELECT charged_micros FROM usage_records WHERE task_id = $1`, c.want},
				{"estimated reservations", `SELECT count(*) FROM budget_reservations WHERE task_id = $1 AND estimated`, 0},
			}, task.ID)
			e.expectScalars([]scalarCheck{{"spent", `SELECT spent_micros FROM budget_periods WHERE owner_id = 'acme'`, c.want}})
			e.checkInvariants()
		})
	}
}

// With a price list, a typo is refused before anything is written, naming
// the close match, on the native and the OpenAI endpoint (in OpenAI's
// envelope there); with TOLLGATE_PASS_THROUGH=on it runs at the flat
// default price, reserved as estimated.
func TestPriceListRefusesTypos(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"gpt-4o-mnii","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	const hint = `did you mean \"gpt-4o-mini\"`
	t.Run("native", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{priceList: testPriceList, noWorkers: true})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		r := e.post(key, "k", body, nil)
		if r.status != http.StatusBadRequest || r.problemCode(t) != "invalid_request" || !strings.Contains(string(r.body), hint) ||
			!strings.Contains(string(r.body), `"model"`) {
			t.Fatalf("%d %s, want 400 invalid_request naming model and the close match", r.status, r.body)
		}
		e.checkNothingWritten()
	})
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{priceList: testPriceList, noWorkers: true})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		r := e.do(http.MethodPost, "/v1/chat/completions", key, body, map[string]string{"Idempotency-Key": "k"})
		var env struct {
			Error struct {
				Message, Type, Code string
				Param               *string
			}
		}
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatalf("%d %s: %v", r.status, r.body, err)
		}
		if r.status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" || env.Error.Param == nil ||
			*env.Error.Param != "model" || !strings.Contains(env.Error.Message, `did you mean "gpt-4o-mini"`) {
			t.Fatalf("%d %s, want 400 in OpenAI's envelope naming model and the close match", r.status, r.body)
		}
		e.checkNothingWritten()
	})
	// The other surfaces refuse in their own envelopes, the same way.
	others := []struct{ path, body, hint string }{
		{"/v1/responses", `{"model":"gpt-4o-mnii","input":"hello"}`, `did you mean \"gpt-4o-mini\"`},
		{"/v1/messages", `{"model":"gpt-4o-mnii","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`, `did you mean \"gpt-4o-mini\"`},
		{"/v1/embeddings", `{"model":"text-embedding-3-smal","input":"hello"}`, `did you mean \"text-embedding-3-small\"`},
	}
	for _, o := range others {
		t.Run(o.path, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{priceList: testPriceList, noWorkers: true})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			r := e.do(http.MethodPost, o.path, key, []byte(o.body), map[string]string{"Idempotency-Key": "k"})
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), o.hint) {
				t.Fatalf("%d %s, want 400 naming the close match", r.status, r.body)
			}
			e.checkNothingWritten()
		})
	}
	t.Run("pass-through on", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{priceList: testPriceList, listPass: true})
		key := e.owner("acme", accounts.RoleClient, 1_000_000)
		e.fake.Script(openAIAnswer(`{"prompt_tokens":1000,"completion_tokens":10,"total_tokens":1010}`))
		r := e.post(key, "k", body, map[string]string{"Prefer": "wait=30"})
		if r.status != http.StatusOK && r.status != http.StatusAccepted {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
		task := e.waitFinished(key, r.task(t).ID)
		if task.Status != "succeeded" {
			t.Fatalf("task %s, want succeeded", task.Status)
		}
		want := budget.DefaultPrice.Cost(1000, 10)
		e.expectScalars([]scalarCheck{
			{"charged at the default", `SELECT charged_micros FROM usage_records WHERE task_id = $1`, want},
			{"estimated reservations", `SELECT count(*) FROM budget_reservations WHERE task_id = $1 AND estimated`, 1},
		}, task.ID)
	})
}
