package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/accounts"
)

// stalledBody is a request body of n bytes that yields its first part and
// then blocks until ctx ends: a server that reads the body to its end
// never answers, so an answer proves the body was not read.
type stalledBody struct {
	ctx  context.Context
	head *bytes.Reader
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if b.head.Len() > 0 {
		return b.head.Read(p)
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// roomCase is one admitting route with a body of about size bytes.
type roomCase struct {
	name, path string
	header     map[string]string
	body       func(text string) []byte
}

func roomCases() []roomCase {
	chat := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": text}}})
		return b
	}
	return []roomCase{
		{"native task", "/v1/tasks", map[string]string{"Idempotency-Key": "room-1"}, chat},
		{"OpenAI chat completion", "/v1/chat/completions", nil, chat},
		{"Anthropic message", "/v1/messages", map[string]string{"anthropic-version": "2023-06-01"}, chat},
		{"OpenAI response", "/v1/responses", nil, func(text string) []byte {
			b, _ := json.Marshal(map[string]any{"model": testModel, "input": text, "max_output_tokens": 16})
			return b
		}},
	}
}

// errorCode is the code of any dialect's error body: a problem's code,
// OpenAI's error.code, or Anthropic's error.type.
func errorCode(t *testing.T, r response) string {
	t.Helper()
	var body struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	switch {
	case body.Code != "":
		return body.Code
	case body.Error.Code != "":
		return body.Error.Code
	}
	return body.Error.Type
}

// A large request from an owner whose budget has no room is refused with
// the same 402 its dialect gives any budget refusal, before its body is
// read: the body stalls after its first KiB, so reading it would never
// answer. Nothing is created, nothing called. The same request from an
// owner with room is admitted: the check refuses only what no admission
// could take.
func TestLargeBodyFromAnOwnerWithNoRoomIsRefusedUnread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	broke := e.owner("broke", accounts.RoleClient, 0)
	rich := e.owner("rich", accounts.RoleClient, 1_000_000_000)
	big := strings.Repeat("a prompt that fills a large body. ", 900<<10/34)
	for _, c := range roomCases() {
		t.Run(c.name, func(t *testing.T) {
			small := e.do(http.MethodPost, c.path, broke, c.body("hi"), c.header)
			if small.status != http.StatusPaymentRequired && small.status != http.StatusTooManyRequests {
				t.Fatalf("small body from an owner with no room: %d %s; want the dialect's budget refusal", small.status, small.body)
			}
			body := c.body(big)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+c.path, &stalledBody{ctx: ctx, head: bytes.NewReader(body[:1024])})
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+broke)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			res, err := e.client.Do(req)
			if err != nil {
				t.Fatalf("large body from an owner with no room: %v (the server read the body instead of refusing it)", err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			large := response{status: res.StatusCode, header: res.Header, body: got}
			if large.status != small.status || errorCode(t, large) != errorCode(t, small) {
				t.Errorf("large body: %d %s; want %d %s as for a small one", large.status, got, small.status, errorCode(t, small))
			}
			if !bytes.Contains(got, []byte("least a request reserves")) {
				t.Errorf("large body's refusal %s does not say what the least request reserves", got)
			}
			wait := map[string]string{"Prefer": "wait=30"}
			for k, v := range c.header {
				wait[k] = v
			}
			if r := e.do(http.MethodPost, c.path, rich, body, wait); r.status >= 300 {
				t.Errorf("large body from an owner with room: %d %.300s; want it admitted", r.status, r.body)
			}
		})
	}
	e.expectScalars([]scalarCheck{
		{"tasks of the owner with no room", `SELECT count(*) FROM tasks WHERE owner_id = 'broke'`, 0},
		{"tasks of the owner with room", `SELECT count(*) FROM tasks WHERE owner_id = 'rich'`, int64(len(roomCases()))},
	})
	e.checkInvariants()
}

// A refusal of the room check is remembered for a second: room that
// appears meanwhile (here a top-up) reaches large requests once it has
// passed, and a small request is decided by the admission at once.
func TestRoomRefusalIsRememberedForASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	at := time.Now().UTC().Truncate(time.Second)
	e.clock.Set(at)
	broke := e.owner("broke", accounts.RoleClient, 0)
	big := roomCases()[1].body(strings.Repeat("a prompt that fills a large body. ", 100<<10/34))
	chat := func(body []byte) response {
		return e.do(http.MethodPost, "/v1/chat/completions", broke, body, nil)
	}
	if r := chat(big); r.status != http.StatusTooManyRequests && r.status != http.StatusPaymentRequired {
		t.Fatalf("large body with no room: %d %s", r.status, r.body)
	}
	if _, err := e.budgets.Topup(t.Context(), "broke", "", 1_000_000, "test", "room appears"); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(at.Add(500 * time.Millisecond))
	if r := chat(big); !bytes.Contains(r.body, []byte("least a request reserves")) {
		t.Errorf("large body half a second after the top-up: %d %.200s; want the remembered refusal", r.status, r.body)
	}
	if r := chat(roomCases()[1].body("hi")); r.status != http.StatusOK {
		t.Errorf("small body after the top-up: %d %.200s; want it admitted by the admission", r.status, r.body)
	}
	e.clock.Set(at.Add(time.Second))
	if r := chat(big); r.status != http.StatusOK {
		t.Errorf("large body a second after the refusal: %d %.200s; want it admitted", r.status, r.body)
	}
	e.checkInvariants()
}
