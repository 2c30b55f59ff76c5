package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// embeddingCatalog has embedding models on an OpenAI-kind key and on
// Workers AI, priced at 1 micro per input token (embed-model) and 2
// (cf-embed), beside a chat model and an Anthropic one.
const embeddingCatalog = `
providers:
  - {key: default, kind: openai, base_url: fake, api_key_env: TEST_OPENAI_KEY}
  - {key: backup, kind: anthropic, base_url: fake, api_key_env: TEST_ANTHROPIC_KEY}
  - {key: workers, kind: cloudflare, base_url: fake, account_id: acct1, api_key_env: TEST_CF_KEY}
default_model: test-model
models:
  - {name: test-model, provider: default, input_micros_per_mtok: 1000000, output_micros_per_mtok: 2000000}
  - {name: embed-model, kind: embedding, provider: default, provider_model: text-embedding-3-small, input_micros_per_mtok: 1000000}
  - {name: cf-embed, kind: embedding, provider: workers, provider_model: "@cf/baai/bge-base-en-v1.5", input_micros_per_mtok: 2000000}
  - {name: claude-model, provider: backup, input_micros_per_mtok: 1, output_micros_per_mtok: 1}
`

func embeddingParams(model string, input ...string) openai.EmbeddingNewParams {
	p := openai.EmbeddingNewParams{Model: model}
	if len(input) == 1 {
		p.Input = openai.EmbeddingNewParamsInputUnion{OfString: openai.String(input[0])}
	} else {
		p.Input = openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: input}
	}
	return p
}

// vectorsOf is the SDK's answer as float32 vectors, in index order.
func vectorsOf(t *testing.T, res *openai.CreateEmbeddingResponse) [][]float32 {
	t.Helper()
	out := make([][]float32, len(res.Data))
	for i, d := range res.Data {
		if d.Index != int64(i) || d.Object != "embedding" {
			t.Fatalf("data[%d] = index %d object %q", i, d.Index, d.Object)
		}
		v := make([]float32, len(d.Embedding))
		for j, x := range d.Embedding {
			v[j] = float32(x)
		}
		out[i] = v
	}
	return out
}

func fakeVectors(texts []string, dims int) [][]float32 {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		out[i] = fake.Vector(text, dims)
	}
	return out
}

// The SDK's embeddings client gets the fake's vectors for a string, an
// array, dimensions and base64, and the provider gets every field.
func TestEmbeddingsSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	cases := []struct {
		name     string
		input    []string
		dims     int64
		format   openai.EmbeddingNewParamsEncodingFormat
		user     string
		wantDims int
		wantSent map[string]any
	}{
		{name: "a string", input: []string{"hello there"}, wantDims: 8,
			wantSent: map[string]any{"model": "text-embedding-3-small", "input": []any{"hello there"}}},
		{name: "an array", input: []string{"first", "second text", "third"}, wantDims: 8,
			wantSent: map[string]any{"model": "text-embedding-3-small", "input": []any{"first", "second text", "third"}}},
		{name: "dimensions and user", input: []string{"short"}, dims: 24, user: "end-user-7", wantDims: 24,
			wantSent: map[string]any{"model": "text-embedding-3-small", "input": []any{"short"}, "dimensions": 24.0, "user": "end-user-7"}},
		{name: "base64", input: []string{"encode me", "and me"}, format: openai.EmbeddingNewParamsEncodingFormatBase64, wantDims: 8,
			wantSent: map[string]any{"model": "text-embedding-3-small", "input": []any{"encode me", "and me"}, "encoding_format": "base64"}},
	}
	for _, tc := range cases {
		e.fake.Reset()
		params := embeddingParams("embed-model", tc.input...)
		if tc.dims > 0 {
			params.Dimensions = openai.Int(tc.dims)
		}
		if tc.user != "" {
			params.User = openai.String(tc.user)
		}
		params.EncodingFormat = tc.format
		var raw *http.Response
		res, err := client.Embeddings.New(context.Background(), params, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(fakeVectors(tc.input, tc.wantDims), vectorsOf(t, res)); diff != "" {
			t.Errorf("%s: vectors mismatch (-want +got):\n%s", tc.name, diff)
		}
		tokens := int64(fake.EmbeddingTokens(tc.input))
		if res.Model != "embed-model" || res.Usage.PromptTokens != tokens || res.Usage.TotalTokens != tokens {
			t.Errorf("%s: model %q usage %+v, want embed-model and %d tokens", tc.name, res.Model, res.Usage, tokens)
		}
		if raw.Header.Get("X-Tollgate-Task-Id") == "" {
			t.Errorf("%s: no X-Tollgate-Task-Id", tc.name)
		}
		if tc.format == openai.EmbeddingNewParamsEncodingFormatBase64 && !strings.HasPrefix(res.Data[0].JSON.Embedding.Raw(), `"`) {
			t.Errorf("%s: embedding sent as %.40s, want a base64 string", tc.name, res.Data[0].JSON.Embedding.Raw())
		}
		calls := e.fake.Calls()
		if len(calls) != 1 {
			t.Fatalf("%s: provider calls = %d, want 1", tc.name, len(calls))
		}
		var sent map[string]any
		if err := json.Unmarshal(calls[0].Body, &sent); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.wantSent, sent); diff != "" {
			t.Errorf("%s: body sent mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	e.checkInvariants()
}

// The same key and body answer the same vectors without a second call,
// and the same key with another body is 422.
func TestEmbeddingsIdempotentReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := context.Background()
	params := embeddingParams("embed-model", "one", "two")
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	var raw1, raw2 *http.Response
	first, err := client.Embeddings.New(ctx, params, option.WithHeader("Idempotency-Key", "emb-1"), option.WithResponseInto(&raw1))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Embeddings.New(ctx, params, option.WithHeader("Idempotency-Key", "emb-1"), option.WithResponseInto(&raw2))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(vectorsOf(t, first), vectorsOf(t, second)); diff != "" {
		t.Errorf("replayed vectors differ (-first +second):\n%s", diff)
	}
	if first.Usage.PromptTokens != second.Usage.PromptTokens || first.Usage.TotalTokens != second.Usage.TotalTokens {
		t.Errorf("usage %d/%d then %d/%d", first.Usage.PromptTokens, first.Usage.TotalTokens, second.Usage.PromptTokens, second.Usage.TotalTokens)
	}
	if raw1.Header.Get("X-Tollgate-Task-Id") != raw2.Header.Get("X-Tollgate-Task-Id") || raw2.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay headers: task %s vs %s, Idempotent-Replayed %q", raw1.Header.Get("X-Tollgate-Task-Id"),
			raw2.Header.Get("X-Tollgate-Task-Id"), raw2.Header.Get("Idempotent-Replayed"))
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Errorf("provider calls = %d, want 1", n)
	}
	_, err = client.Embeddings.New(ctx, embeddingParams("embed-model", "one", "three"), option.WithHeader("Idempotency-Key", "emb-1"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.Code != "idempotency_key_reused" {
		t.Errorf("another body under the key: %v, want 422 idempotency_key_reused", err)
	}
	// The task API shows the answer too: the vectors opened for the
	// owner, described by count, length and digest.
	task := e.waitFinished(key, raw1.Header.Get("X-Tollgate-Task-Id"))
	emb := task.Result.Embedding
	if emb == nil || emb.Count != 2 || emb.Dimensions != 8 || emb.SHA256 != tasks.VectorsSHA256(vectorsOf(t, first)) ||
		!cmp.Equal(emb.Vectors, vectorsOf(t, first)) {
		t.Errorf("task result embedding = %+v", emb)
	}
	e.checkInvariants()
}

// The reservation is the input estimate at the input price, no output;
// the settlement is the provider's prompt_tokens.
func TestEmbeddingsReserveAndSettle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	e.fake.Script(fake.Scripted{Body: `{"object":"list","model":"text-embedding-3-small","usage":{"prompt_tokens":3,"total_tokens":3},` +
		`"data":[{"object":"embedding","index":0,"embedding":[0.25,-0.5]},{"object":"embedding","index":1,"embedding":[1,2]}]}`})
	// 40 and 12 bytes: an estimate of 10 + 3 tokens.
	in := []string{strings.Repeat("abcd", 10), strings.Repeat("xyz", 4)}
	var raw *http.Response
	res, err := client.Embeddings.New(context.Background(), embeddingParams("embed-model", in...), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]float32{{0.25, -0.5}, {1, 2}}, vectorsOf(t, res)); diff != "" {
		t.Errorf("vectors mismatch (-want +got):\n%s", diff)
	}
	id := raw.Header.Get("X-Tollgate-Task-Id")
	e.expectScalars([]scalarCheck{
		{"reservation", `SELECT amount_micros FROM budget_reservations WHERE task_id = $1 AND state = 'settled' AND NOT estimated`, 13},
		{"reserve entry", `SELECT amount_micros FROM budget_ledger WHERE task_id = $1 AND kind = 'reserve'`, 13},
		{"settle entry", `SELECT amount_micros FROM budget_ledger WHERE task_id = $1 AND kind = 'settle'`, 3},
		{"usage input", `SELECT input_tokens FROM usage_records WHERE task_id = $1 AND source = 'reported'`, 3},
		{"usage output", `SELECT output_tokens FROM usage_records WHERE task_id = $1`, 0},
		{"cost", `SELECT cost_micros FROM usage_records WHERE task_id = $1`, 3},
	}, id)
	if b := e.balance("acme"); b.SpentMicros != 3 || b.ReservedMicros != 0 {
		t.Errorf("balance = %+v, want 3 spent and nothing reserved", b)
	}
	e.checkInvariants()
}

// The stored request and the replay record hold the inputs redacted and
// the vectors' count, length and digest; no table holds a vector in
// clear.
func TestEmbeddingsRecordHoldsNoVectors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	in := []string{"write to canary.embed@example.com today", "plain text"}
	var raw *http.Response
	res, err := client.Embeddings.New(context.Background(), embeddingParams("embed-model", in...), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	id := raw.Header.Get("X-Tollgate-Task-Id")
	vectors := vectorsOf(t, res)

	var stored []string
	if err := e.pool.QueryRow(context.Background(), `SELECT ARRAY(SELECT jsonb_array_elements_text(request->'embedding'->'input')) FROM tasks WHERE id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"write to [EMAIL_1] today", "plain text"}, stored); diff != "" {
		t.Errorf("stored input mismatch (-want +got):\n%s", diff)
	}
	rec := e.do(http.MethodGet, "/v1/tasks/"+id+"/replay", key, nil, nil)
	if rec.status != http.StatusOK {
		t.Fatalf("replay: %d %s", rec.status, rec.body)
	}
	var record struct {
		Request  tasks.Request `json:"request"`
		Attempts []struct {
			Parameters struct {
				Inputs int `json:"inputs"`
			} `json:"parameters"`
			Response struct {
				Embedding struct {
					Count, Dimensions int
					SHA256            string
				} `json:"embedding"`
			} `json:"response"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(rec.body, &record); err != nil {
		t.Fatal(err)
	}
	if len(record.Attempts) != 1 || record.Request.Embedding == nil || record.Request.Embedding.Input[0] != "write to [EMAIL_1] today" {
		t.Fatalf("replay record = %s", rec.body)
	}
	got := record.Attempts[0]
	if got.Parameters.Inputs != 2 || got.Response.Embedding.Count != 2 || got.Response.Embedding.Dimensions != 8 ||
		got.Response.Embedding.SHA256 != tasks.VectorsSHA256(vectors) {
		t.Errorf("replay attempt = %+v, want 2 inputs, 2 vectors of 8 and their digest", got)
	}
	if n := e.scalar(`SELECT count(*) FROM replay_records WHERE task_id = $1 AND response->'embedding'->>'sha256' = $2`, id, tasks.VectorsSHA256(vectors)); n != 1 {
		t.Errorf("replay records with the digest = %d, want 1", n)
	}

	// No stored row holds a value of a vector, in JSON or as the bytes
	// OpenAI's base64 carries; no row holds the address either.
	var needles []string
	for _, v := range vectors {
		needles = append(needles, base64.StdEncoding.EncodeToString(provider.EncodeVector(v))[:16])
		for _, x := range v {
			b, _ := json.Marshal(x)
			needles = append(needles, string(b))
		}
	}
	needles = append(needles, "canary.embed@example.com")
	for _, table := range []string{"tasks", "replay_records", "task_attempts", "usage_records", "budget_ledger", "budget_reservations", "task_kept_answers"} {
		var dump string
		if err := e.pool.QueryRow(context.Background(), `SELECT COALESCE(string_agg(x::text, '|'), '') FROM `+table+` x`).Scan(&dump); err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if strings.Contains(dump, n) {
				t.Errorf("table %s holds %q in clear", table, n)
			}
		}
	}
}

// A provider's failures classify as a chat's do, and reach the SDK as
// OpenAI's answers.
func TestEmbeddingsProviderFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog, maxAttempts: 2})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, ct := sdk(e, key, option.WithMaxRetries(0))
	cases := []struct {
		name   string
		script []fake.Scripted
		status int
		code   string
		class  string
		calls  int
	}{
		{"rate limited", []fake.Scripted{{Status: 429, Headers: map[string]string{"Retry-After": "7"},
			Body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}},
			http.StatusTooManyRequests, "rate_limit_exceeded", "throttled", 1},
		{"server errors", repeat(fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error"}}`}, 2),
			http.StatusServiceUnavailable, "model_temporarily_unavailable", "transient", 2},
		{"rejected input", []fake.Scripted{{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`}},
			http.StatusBadRequest, "context_length_exceeded", "rejected", 1},
	}
	for i, tc := range cases {
		e.fake.Reset()
		e.fake.Script(tc.script...)
		before := ct.n.Load()
		var raw *http.Response
		_, err := client.Embeddings.New(context.Background(), embeddingParams("embed-model", "case "+tc.name), option.WithResponseInto(&raw))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Code != tc.code {
			t.Errorf("%s: %v, want %d %s", tc.name, err, tc.status, tc.code)
			continue
		}
		if tc.code == "context_length_exceeded" && apiErr.Param != "input" {
			t.Errorf("%s: param %q, want input", tc.name, apiErr.Param)
		}
		if n := ct.n.Load() - before; n != 1 {
			t.Errorf("%s: SDK requests = %d, want 1", tc.name, n)
		}
		if n := e.fake.CallCount(); n != tc.calls {
			t.Errorf("%s: provider calls = %d, want %d", tc.name, n, tc.calls)
		}
		if n := e.scalar(`SELECT count(*) FROM replay_records WHERE error->>'class' = $1`, tc.class); n < 1 {
			t.Errorf("%s: no replay record of class %s", tc.name, tc.class)
		}
		if tc.class == "throttled" {
			// The key is paused: resume it for the next case.
			if _, err := e.pool.Exec(context.Background(), `DELETE FROM provider_gates`); err != nil {
				t.Logf("case %d: %v", i, err)
			}
		}
	}
	e.checkInvariants()
}

// A Workers AI embedding model answers through the same endpoint.
func TestEmbeddingsOnWorkersAI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	in := []string{"a story about an orange cloud", "a llama"}
	var raw *http.Response
	res, err := client.Embeddings.New(context.Background(), embeddingParams("cf-embed", in...), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fakeVectors(in, 8), vectorsOf(t, res)); diff != "" {
		t.Errorf("vectors mismatch (-want +got):\n%s", diff)
	}
	calls := e.fake.Calls()
	if len(calls) != 1 || calls[0].Model != "@cf/baai/bge-base-en-v1.5" || !strings.Contains(string(calls[0].Body), `"text":[`) {
		t.Fatalf("calls = %+v", calls)
	}
	// Workers AI reports no usage: settled at the estimate, labelled so,
	// at 2 micros a token (8 + 2 tokens).
	id := raw.Header.Get("X-Tollgate-Task-Id")
	e.expectScalars([]scalarCheck{
		{"usage input", `SELECT input_tokens FROM usage_records WHERE task_id = $1 AND source = 'estimated'`, 10},
		{"cost", `SELECT cost_micros FROM usage_records WHERE task_id = $1`, 20},
	}, id)
	if res.Usage.PromptTokens != 10 {
		t.Errorf("usage = %+v, want 10 prompt tokens", res.Usage)
	}
	e.checkInvariants()
}

// A model of the wrong kind, or whose provider has no embeddings, is
// refused by name before anything is written.
func TestEmbeddingsRefusedModels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key, option.WithMaxRetries(0))
	ctx := context.Background()
	dims := embeddingParams("cf-embed", "x")
	dims.Dimensions = openai.Int(64)
	cases := []struct {
		name    string
		call    func() error
		code    string
		param   string
		message string
	}{
		{"anthropic model", func() error {
			_, err := client.Embeddings.New(ctx, embeddingParams("claude-model", "x"))
			return err
		}, tasks.CodeModelLacksEmbeddings, "model", "anthropic"},
		{"chat model", func() error {
			_, err := client.Embeddings.New(ctx, embeddingParams("test-model", "x"))
			return err
		}, tasks.CodeModelLacksEmbeddings, "model", "chat model"},
		{"embedding model on chat", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "embed-model",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			return err
		}, tasks.CodeModelLacksChat, "model", "embedding model"},
		{"dimensions on Workers AI", func() error {
			_, err := client.Embeddings.New(ctx, dims)
			return err
		}, tasks.CodeUnsupportedField, "dimensions", "Workers AI"},
	}
	for _, tc := range cases {
		err := tc.call()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != tc.code || apiErr.Param != tc.param ||
			!strings.Contains(apiErr.Message, tc.message) {
			t.Errorf("%s: %v, want 400 %s param %s mentioning %q", tc.name, err, tc.code, tc.param, tc.message)
		}
	}
	e.checkNothingWritten()
}

// Bad input is answered in OpenAI's envelope, naming the field, with no
// provider call and nothing written.
func TestEmbeddingsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog, maxBody: 64 << 10})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	many := `"` + strings.Repeat(`a","`, provider.MaxEmbeddingInputs) + `a"`
	cases := []struct {
		name   string
		body   string
		key    string // "" uses the owner's
		header map[string]string
		status int
		param  string // "" wants null
	}{
		{name: "malformed JSON", body: `{"model":"embed-model","input":`, status: 400},
		{name: "not an object", body: `["embed-model"]`, status: 400, param: "body"},
		{name: "empty body", body: ``, status: 400},
		{name: "input missing", body: `{"model":"embed-model"}`, status: 400, param: "input"},
		{name: "input a number", body: `{"model":"embed-model","input":5}`, status: 400, param: "input"},
		{name: "input an object", body: `{"model":"embed-model","input":{"text":"a"}}`, status: 400, param: "input"},
		{name: "token array", body: `{"model":"embed-model","input":[1,2,3]}`, status: 400, param: "input"},
		{name: "token arrays", body: `{"model":"embed-model","input":[[1,2],[3]]}`, status: 400, param: "input"},
		{name: "an item not a string", body: `{"model":"embed-model","input":["a",true]}`, status: 400, param: "input[1]"},
		{name: "NUL in input", body: `{"model":"embed-model","input":"a\u0000b"}`, status: 400, param: "input"},
		{name: "NUL in an item", body: `{"model":"embed-model","input":["ok","a\u0000b"]}`, status: 400, param: "input[1]"},
		{name: "empty string", body: `{"model":"embed-model","input":""}`, status: 400, param: "input[0]"},
		{name: "empty array", body: `{"model":"embed-model","input":[]}`, status: 400, param: "input"},
		{name: "too many inputs", body: `{"model":"embed-model","input":[` + many + `]}`, status: 400, param: "input"},
		{name: "oversized", body: `{"model":"embed-model","input":"` + strings.Repeat("x", 70<<10) + `"}`, status: 413},
		{name: "model a number", body: `{"model":5,"input":"a"}`, status: 400, param: "model"},
		{name: "model missing", body: `{"input":"a"}`, status: 400, param: "model"},
		{name: "unknown model", body: `{"model":"nope","input":"a"}`, status: 400, param: "model"},
		{name: "dimensions zero", body: `{"model":"embed-model","input":"a","dimensions":0}`, status: 400, param: "dimensions"},
		{name: "dimensions negative", body: `{"model":"embed-model","input":"a","dimensions":-1}`, status: 400, param: "dimensions"},
		{name: "dimensions huge", body: `{"model":"embed-model","input":"a","dimensions":100000}`, status: 400, param: "dimensions"},
		{name: "dimensions beyond int64", body: `{"model":"embed-model","input":"a","dimensions":1e30}`, status: 400, param: "dimensions"},
		{name: "dimensions a fraction", body: `{"model":"embed-model","input":"a","dimensions":1.5}`, status: 400, param: "dimensions"},
		{name: "dimensions a string", body: `{"model":"embed-model","input":"a","dimensions":"8"}`, status: 400, param: "dimensions"},
		{name: "encoding int8", body: `{"model":"embed-model","input":"a","encoding_format":"int8"}`, status: 400, param: "encoding_format"},
		{name: "unknown field", body: `{"model":"embed-model","input":"a","truncate":true}`, status: 400, param: "truncate"},
		{name: "case variant", body: `{"model":"embed-model","Input":"a"}`, status: 400, param: "Input"},
		{name: "bad idempotency key", body: `{"model":"embed-model","input":"a"}`, header: map[string]string{"Idempotency-Key": "é"}, status: 400},
		{name: "no key", body: `{"model":"embed-model","input":"a"}`, key: "-", status: 401},
		{name: "unknown key", body: `{"model":"embed-model","input":"a"}`, key: "tg_unknown", status: 401},
	}
	for _, tc := range cases {
		k := key
		switch tc.key {
		case "-":
			k = ""
		case "":
		default:
			k = tc.key
		}
		r := e.do(http.MethodPost, "/v1/embeddings", k, []byte(tc.body), tc.header)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Message == "" || env.Error.Type == "" {
			t.Errorf("%s: body %s is not OpenAI's error envelope", tc.name, r.body)
			continue
		}
		param := ""
		if env.Error.Param != nil {
			param = *env.Error.Param
		}
		if tc.param != "" && param != tc.param {
			t.Errorf("%s: param %q, want %q (%s)", tc.name, param, tc.param, r.body)
		}
		if r.header.Get("x-should-retry") != "false" {
			t.Errorf("%s: x-should-retry %q, want false", tc.name, r.header.Get("x-should-retry"))
		}
	}
	e.checkNothingWritten()
}

// The native task API does not take embeddings: they have their own
// endpoint.
func TestTasksRefuseEmbedding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	r := e.post(key, "k1", []byte(`{"model":"embed-model","embedding":{"input":["a"]}}`), nil)
	if r.status != http.StatusBadRequest || r.problemCode(t) != "invalid_request" || !strings.Contains(string(r.body), "embedding") {
		t.Errorf("POST /v1/tasks with embedding: %d %s", r.status, r.body)
	}
	e.checkNothingWritten()
}
