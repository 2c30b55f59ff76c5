package catalog_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/catalog"
)

func TestEmbeddingModels(t *testing.T) {
	t.Parallel()
	const providers = "providers: [{key: p, kind: openai}, {key: a, kind: anthropic}, {key: w, kind: cloudflare, account_id: x}]\n"
	c, err := catalog.Parse([]byte(providers+`models:
  - {name: small-embed, kind: embedding, provider: p, provider_model: text-embedding-3-small, input_micros_per_mtok: 20000, fallback: [bge]}
  - {name: bge, kind: embedding, provider: w, provider_model: "@cf/baai/bge-base-en-v1.5", input_micros_per_mtok: 67000}
  - {name: chat, provider: p, input_micros_per_mtok: 1, output_micros_per_mtok: 2}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.DefaultModel != "chat" {
		t.Errorf("default model = %q, want the first chat model", c.DefaultModel)
	}
	embed, _, _ := c.Resolve("small-embed")
	chat, _, _ := c.Resolve("chat")
	if !embed.Serves(true) || embed.Serves(false) || chat.Serves(true) || !chat.Serves(false) {
		t.Errorf("Serves: embedding model %v/%v, chat model %v/%v", embed.Serves(true), embed.Serves(false), chat.Serves(true), chat.Serves(false))
	}
	if p := embed.Price(); p.InputPerMTok != 20000 || p.OutputPerMTok != 0 {
		t.Errorf("price = %+v", p)
	}
	c.PassThrough = true
	if m, _, _ := c.Resolve("unlisted"); !m.Serves(true) || !m.Serves(false) {
		t.Error("a pass-through model serves both kinds of call")
	}

	cases := []struct{ name, models, want string }{
		{"unknown kind", "[{name: m, kind: image, provider: p}]", `kind must be chat or embedding, not "image"`},
		{"on anthropic", "[{name: m, kind: embedding, provider: a}]", "anthropic has none"},
		{"output price", "[{name: m, kind: embedding, provider: p, output_micros_per_mtok: 1}]", "input price only"},
		{"cached price", "[{name: m, kind: embedding, provider: p, cached_input_micros_per_mtok: 1}]", "input price only"},
		{"output limit", "[{name: m, kind: embedding, provider: p, max_output_tokens: 10}]", "writes no output"},
		{"tools", "[{name: m, kind: embedding, provider: p, tools: true}]", "writes no output"},
		{"fallback across kinds", "[{name: c, provider: p, fallback: [m]}, {name: m, kind: embedding, provider: p}]", `fallback "m" is of kind embedding, not chat`},
		{"embedding default", "[{name: c, provider: p}, {name: m, kind: embedding, provider: p}]\ndefault_model: m", "is an embedding model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.Parse([]byte(providers+"models: "+tc.models+"\n"), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
