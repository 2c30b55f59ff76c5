package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/accounts"
)

// A request the OpenAI surface refuses for a field reaches the official
// SDK with that field in param and the reason in the message, on each
// route that shares OpenAI's envelope; neither quotes what was sent.
func TestOpenAISDKErrorsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: embeddingCatalog})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key, option.WithMaxRetries(0))
	ctx := context.Background()
	const secret = "do-not-echo-this-prompt"
	cases := []struct {
		name  string
		call  func() error
		param string
		says  string // in the message, beside the param
	}{
		{"chat: a number out of range", func() error {
			p := chatParams(secret)
			p.Temperature = openai.Float(9)
			_, err := client.Chat.Completions.New(ctx, p)
			return err
		}, "temperature", "between 0 and 2"},
		{"chat: an unknown role", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithJSONSet("messages.0.role", "oracle"))
			return err
		}, "messages[0].role", "must be"},
		{"chat: a wrong type", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithJSONSet("messages.0.content", 5))
			return err
		}, "messages[0].content", "must be a string or an array"},
		{"chat: a model not offered", func() error {
			p := chatParams(secret)
			p.Model = "no-such-model"
			_, err := client.Chat.Completions.New(ctx, p)
			return err
		}, "model", "not a model this service offers"},
		{"responses: a number out of range", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: testModel,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(secret)}, Temperature: openai.Float(9)})
			return err
		}, "temperature", "between 0 and 2"},
		{"embeddings: a wrong type", func() error {
			_, err := client.Embeddings.New(ctx, embeddingParams("embed-model", secret), option.WithJSONSet("input", 5))
			return err
		}, "input", "must be a string or an array"},
		// Numbers: the range OpenAI documents, an explicit 0 included
		// (OpenAI refuses it; it is not "unset"), whatever the number.
		{"chat: max_tokens 0", func() error {
			p := chatParams(secret)
			p.MaxTokens = openai.Int(0)
			_, err := client.Chat.Completions.New(ctx, p)
			return err
		}, "max_tokens", "must be between 1 and 1000000"},
		{"chat: max_completion_tokens 0", func() error {
			p := chatParams(secret)
			p.MaxCompletionTokens = openai.Int(0)
			_, err := client.Chat.Completions.New(ctx, p)
			return err
		}, "max_completion_tokens", "must be between 1 and 1000000"},
		{"chat: n 0", func() error {
			p := chatParams(secret)
			p.N = openai.Int(0)
			_, err := client.Chat.Completions.New(ctx, p)
			return err
		}, "n", "must be between 1 and 128"},
		{"chat: max_tokens beyond int64", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithJSONSet("max_tokens", json.RawMessage("9223372036854775808")))
			return err
		}, "max_tokens", "must be between 1 and 1000000"},
		{"chat: max_tokens 1e30", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithJSONSet("max_tokens", json.RawMessage("1e30")))
			return err
		}, "max_tokens", "must be between 1 and 1000000"},
		{"chat: seed 1.5", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithJSONSet("seed", 1.5))
			return err
		}, "seed", "must be a whole number between"},
		{"chat: temperature NaN", func() error {
			_, err := client.Chat.Completions.New(ctx, chatParams(secret), option.WithRequestBody("application/json",
				[]byte(`{"model":"`+testModel+`","messages":[{"role":"user","content":"`+secret+`"}],"temperature":NaN}`)))
			return err
		}, "temperature", "must be a number between 0 and 2 (NaN is not a number)"},
		{"responses: max_output_tokens 0", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: testModel,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(secret)}, MaxOutputTokens: openai.Int(0)})
			return err
		}, "max_output_tokens", "must be between 1 and 1000000"},
		{"responses: max_output_tokens 1e30", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: testModel,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(secret)}}, option.WithJSONSet("max_output_tokens", json.RawMessage("1e30")))
			return err
		}, "max_output_tokens", "must be between 1 and 1000000"},
		{"responses: top_p Infinity", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json",
				[]byte(`{"model":"`+testModel+`","input":"`+secret+`","top_p":Infinity}`)))
			return err
		}, "top_p", "must be a number between 0 and 1 (Infinity is not a finite number)"},
		{"embeddings: dimensions 1e30", func() error {
			_, err := client.Embeddings.New(ctx, embeddingParams("embed-model", secret), option.WithJSONSet("dimensions", json.RawMessage("1e30")))
			return err
		}, "dimensions", "must be between 1 and 16384"},
		{"embeddings: dimensions 2.5", func() error {
			_, err := client.Embeddings.New(ctx, embeddingParams("embed-model", secret), option.WithJSONSet("dimensions", 2.5))
			return err
		}, "dimensions", "must be a whole number between 1 and 16384"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *openai.Error", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" || apiErr.Param != c.param {
				t.Errorf("%d %s param %q, want 400 invalid_request_error param %q", apiErr.StatusCode, apiErr.Type, apiErr.Param, c.param)
			}
			if !strings.Contains(apiErr.Message, c.param) || !strings.Contains(apiErr.Message, c.says) {
				t.Errorf("message %q, want it to name %q and say %q", apiErr.Message, c.param, c.says)
			}
			if strings.Contains(apiErr.RawJSON(), secret) || strings.Contains(apiErr.RawJSON(), "oracle") {
				t.Errorf("the error quotes the request: %s", apiErr.RawJSON())
			}
			if goSpeak([]byte(apiErr.RawJSON())) && c.param != "seed" {
				t.Errorf("the error speaks Go: %s", apiErr.RawJSON())
			}
		})
	}
}

// A budget refusal says what the request needed and what was left, in
// micros and in units: as members and in detail of the native problem,
// and in the message of the OpenAI and Anthropic envelopes.
func TestBudgetRefusalSaysTheFigures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	const left = 1500 // micros, below each request's reservation
	key := e.owner("acme", accounts.RoleClient, left)

	r := e.post(key, "poor-1", taskBody("abcdefgh", 1000), nil)
	if r.status != http.StatusPaymentRequired {
		t.Fatalf("POST /v1/tasks: %d %s, want 402", r.status, r.body)
	}
	var p struct {
		Code            string `json:"code"`
		Detail          string `json:"detail"`
		NeededMicros    *int64 `json:"needed_micros"`
		AvailableMicros *int64 `json:"available_micros"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Code != "budget_exceeded" || p.NeededMicros == nil || p.AvailableMicros == nil || *p.AvailableMicros != left || *p.NeededMicros <= left {
		t.Fatalf("problem %s, want budget_exceeded with needed_micros above %d and available_micros %d", r.body, left, left)
	}
	for _, want := range []string{
		strconv.FormatInt(*p.NeededMicros, 10) + " micros (" + unitsOf(*p.NeededMicros) + " units)",
		"1500 micros (0.0015 units)",
	} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q, want it to say %q", p.Detail, want)
		}
	}

	client, _ := sdk(e, key, option.WithMaxRetries(0))
	params := chatParams("abcdefgh")
	params.MaxTokens = openai.Int(1000)
	_, err := client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("OpenAI SDK: err = %v, want a 402", err)
	}
	if !strings.Contains(apiErr.Message, "1500 micros (0.0015 units) are left") || !strings.Contains(apiErr.Message, "it needs up to") {
		t.Errorf("OpenAI message %q, want the figures", apiErr.Message)
	}

	a := e.do(http.MethodPost, "/v1/messages", key,
		[]byte(`{"model":"test-model","max_tokens":1000,"messages":[{"role":"user","content":"abcdefgh"}]}`), nil)
	var ant struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	if err := json.Unmarshal(a.body, &ant); err != nil || a.status != http.StatusPaymentRequired || ant.Error.Type != "billing_error" {
		t.Fatalf("POST /v1/messages: %d %s, want a 402 billing_error", a.status, a.body)
	}
	if !strings.Contains(ant.Error.Message, "1500 micros (0.0015 units) are left") {
		t.Errorf("Anthropic message %q, want the figures", ant.Error.Message)
	}
}

// One Content-Type rule on every route that takes a JSON body: none, or
// application/json with or without parameters, is read as JSON; any
// other type (curl -d's form encoding) is a 415 that says what to send,
// in each surface's own envelope.
func TestOneContentTypeRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	client := e.owner("acme", accounts.RoleClient, 1_000_000)
	admin := e.owner("ops", accounts.RoleAdmin, 0)
	routes := []struct {
		path, key string
		message   func([]byte) string // where the surface says why
	}{
		{"/v1/tasks", client, problemDetail},
		{"/v1/routes/tagline", client, problemDetail},
		{"/v1/budgets/acme/topups", admin, problemDetail},
		{"/v1/chat/completions", client, envelopeMessage},
		{"/v1/responses", client, envelopeMessage},
		{"/v1/embeddings", client, envelopeMessage},
		{"/v1/messages", client, envelopeMessage},
		{"/v1/messages/count_tokens", client, envelopeMessage},
	}
	types := []struct {
		ct      string
		refused bool
	}{
		{"", false},
		{"application/json", false},
		{"application/json; charset=utf-8", false},
		{"application/x-www-form-urlencoded", true},
		{"text/plain", true},
		{"not a media type", true},
	}
	for _, rt := range routes {
		for _, ty := range types {
			t.Run(rt.path+" "+ty.ct, func(t *testing.T) {
				// An empty JSON object: a 400 at worst once read, never a 415.
				r := e.do(http.MethodPost, rt.path, rt.key, []byte(`{}`),
					map[string]string{"Content-Type": ty.ct, "Idempotency-Key": "ct"})
				if !ty.refused {
					if r.status == http.StatusUnsupportedMediaType || r.status >= 500 {
						t.Errorf("%d %s, want the body read as JSON", r.status, truncate(r.body))
					}
					return
				}
				if r.status != http.StatusUnsupportedMediaType {
					t.Fatalf("%d %s, want 415", r.status, truncate(r.body))
				}
				if msg := rt.message(r.body); !strings.Contains(msg, "Content-Type: application/json") {
					t.Errorf("message %q, want it to say to send Content-Type: application/json", msg)
				}
			})
		}
	}
}

// A body above the limit is a 413 that names the limit in bytes.
func TestTooLargeNamesTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 4 << 10})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	big := taskBody(strings.Repeat("x", 8<<10), 10)
	for path, message := range map[string]func([]byte) string{
		"/v1/tasks": problemDetail, "/v1/chat/completions": envelopeMessage, "/v1/messages": envelopeMessage,
	} {
		r := e.do(http.MethodPost, path, key, big, map[string]string{"Idempotency-Key": "big"})
		if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(message(r.body), "limit of 4096 bytes") {
			t.Errorf("%s: %d %s, want 413 naming the limit of 4096 bytes", path, r.status, truncate(r.body))
		}
	}
}

// Error messages read as written in the JSON itself, on every surface:
// no \u003c escapes, in a 401's message or in a field's reason.
func TestErrorMessagesAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	badImage := []byte(`{"model":"test-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:nope"}}]}]}`)
	cases := []struct {
		name, path, key string
		body            []byte
		status          int
		says            string // verbatim in the body; "" only no escapes
	}{
		{"native 401", "/v1/tasks", "not-a-key", []byte(`{}`), http.StatusUnauthorized, ""},
		{"OpenAI 401", "/v1/chat/completions", "not-a-key", []byte(`{}`), http.StatusUnauthorized, ""},
		{"Anthropic 401", "/v1/messages", "not-a-key", []byte(`{}`), http.StatusUnauthorized, ""},
		{"native field reason", "/v1/tasks", key, badImage, http.StatusBadRequest, "data:image/<type>;base64,<data>"},
		{"OpenAI field reason", "/v1/chat/completions", key, badImage, http.StatusBadRequest, "data:image/<type>;base64,<data>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(http.MethodPost, c.path, c.key, c.body, map[string]string{"Idempotency-Key": "k"})
			if r.status != c.status || strings.Contains(string(r.body), `\u003c`) || strings.Contains(string(r.body), `\u003e`) ||
				!strings.Contains(string(r.body), c.says) {
				t.Errorf("%d %s, want %d without escaped angle brackets, saying %q", r.status, r.body, c.status, c.says)
			}
		})
	}
}

// A Prefer preference Tollgate cannot honour is ignored (RFC 7240 §2):
// the request is answered as without it. A valid wait is still honoured.
func TestPreferItCannotHonourIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	cases := []struct {
		prefer  string
		applied string // Preference-Applied; "" none
	}{
		{"wait=abc", ""},
		{"wait=-1", ""},
		{"wait=1.5", ""},
		{"wait", ""},
		{"handling=lenient, wait=abc", ""},
		{"wait=abc, wait=5", "wait=5"},
		{"respond-async, wait=5", "wait=5"},
	}
	for i, c := range cases {
		t.Run(c.prefer, func(t *testing.T) {
			r := e.post(key, "prefer-"+strconv.Itoa(i), taskBody("abcdefgh", 10), map[string]string{"Prefer": c.prefer})
			if r.status != http.StatusAccepted && r.status != http.StatusOK {
				t.Fatalf("POST: %d %s, want the task admitted", r.status, truncate(r.body))
			}
			if got := r.header.Get("Preference-Applied"); got != c.applied {
				t.Errorf("Preference-Applied %q, want %q", got, c.applied)
			}
			g := e.do(http.MethodGet, "/v1/tasks/"+r.task(t).ID, key, nil, map[string]string{"Prefer": c.prefer})
			if g.status != http.StatusOK || g.header.Get("Preference-Applied") != c.applied {
				t.Errorf("GET: %d Preference-Applied %q, want 200 and %q", g.status, g.header.Get("Preference-Applied"), c.applied)
			}
		})
	}
}

// problemDetail is a problem's detail; envelopeMessage the message of
// OpenAI's and Anthropic's error envelopes.
func problemDetail(b []byte) string {
	var p struct{ Detail string }
	_ = json.Unmarshal(b, &p)
	return p.Detail
}

func envelopeMessage(b []byte) string {
	var env struct{ Error struct{ Message string } }
	_ = json.Unmarshal(b, &env)
	return env.Error.Message
}

// unitsOf writes micros as units (1 unit = 1,000,000 micros), trailing
// zeros dropped: 1500 is 0.0015.
func unitsOf(micros int64) string {
	s := strings.TrimRight(fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000), "0")
	return strings.TrimSuffix(s, ".")
}
