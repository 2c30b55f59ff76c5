package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/provider"
)

func TestRequestHashIgnoresKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	decode := func(s string) Request {
		t.Helper()
		var r Request
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := decode(`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"b":1,"a":{"y":2,"x":1}}}`)
	b := decode(`{ "metadata": {"a": {"x": 1, "y": 2}, "b": 1}, "messages": [{"content": "hi", "role": "user"}], "model": "m" }`)
	c := decode(`{"model":"m","messages":[{"role":"user","content":"hi!"}],"metadata":{"b":1,"a":{"y":2,"x":1}}}`)
	if !bytes.Equal(a.Hash(), b.Hash()) {
		t.Error("equal requests hash differently")
	}
	if bytes.Equal(a.Hash(), c.Hash()) {
		t.Error("different requests hash equally")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := []provider.Message{{Role: "user", Content: provider.Text("x")}}
	cases := []struct {
		name   string
		req    Request
		fields []string
	}{
		{"valid", Request{Chat: provider.Chat{Messages: ok}}, nil},
		{"no messages", Request{}, []string{"messages"}},
		{"bad role and empty content", Request{Chat: provider.Chat{Messages: []provider.Message{{Role: "bot"}}}}, []string{"messages[0].role", "messages[0].content"}},
		{"max_tokens out of range", Request{Chat: provider.Chat{Messages: ok, MaxTokens: MaxMaxTokens + 1}}, []string{"max_tokens"}},
		{"model too long", Request{Chat: provider.Chat{Model: strings.Repeat("m", MaxModelLength+1), Messages: ok}}, []string{"model"}},
	}
	for _, c := range cases {
		err := c.req.Validate()
		var ve *ValidationError
		if c.fields == nil {
			if err != nil {
				t.Errorf("%s: %v, want nil", c.name, err)
			}
			continue
		}
		if !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a ValidationError", c.name, err)
		}
		var got []string
		for _, f := range ve.Fields {
			got = append(got, f.Field)
		}
		if strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: fields %v, want %v", c.name, got, c.fields)
		}
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"":                       false,
		"a":                      true,
		"order 42/retry#1":       true,
		strings.Repeat("k", 255): true,
		strings.Repeat("k", 256): false,
		"tab\there":              false,
		"clé":                    false,
	}
	for key, want := range cases {
		if got := ValidIdempotencyKey(key); got != want {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", key, got, want)
		}
	}
}
