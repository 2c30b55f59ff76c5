package provider_test

import (
	"encoding/base64"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

const bge = "@cf/baai/bge-base-en-v1.5"

func fakeVectors(texts []string, dims int) [][]float32 {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = fake.Vector(t, dims)
	}
	return out
}

func TestOpenAIEmbedAgainstFake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		emb      provider.Embedding
		wantDims int
		wantBody map[string]any
	}{
		{"one input", provider.Embedding{Input: []string{"hello"}}, 8,
			map[string]any{"model": "text-embedding-3-small", "input": []any{"hello"}}},
		{"several inputs, dimensions and user", provider.Embedding{Input: []string{"a", "bb", "ccccc"}, Dimensions: 12, User: "u1"}, 12,
			map[string]any{"model": "text-embedding-3-small", "input": []any{"a", "bb", "ccccc"}, "dimensions": 12.0, "user": "u1"}},
		{"base64 as the client asked", provider.Embedding{Input: []string{"x", "y"}, EncodingFormat: provider.EncodingBase64}, 8,
			map[string]any{"model": "text-embedding-3-small", "input": []any{"x", "y"}, "encoding_format": "base64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := startFake(t)
			got, err := c.Embed(t.Context(), provider.EmbeddingRequest{Model: "text-embedding-3-small", Embedding: tt.emb, IdempotencyKey: "task-1:1"})
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			want := &provider.EmbeddingResponse{Vectors: fakeVectors(tt.emb.Input, tt.wantDims), Model: "text-embedding-3-small",
				Usage: &provider.Usage{InputTokens: int64(fake.EmbeddingTokens(tt.emb.Input))}, Status: 200}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Embed mismatch (-want +got):\n%s", diff)
			}
			calls := f.Calls()
			if len(calls) != 1 || calls[0].IdempotencyKey != "task-1:1" {
				t.Fatalf("calls = %+v, want one with key task-1:1", calls)
			}
			if diff := cmp.Diff(tt.wantBody, decodeJSON(t, calls[0].Body)); diff != "" {
				t.Errorf("body sent mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkersAIEmbedAgainstFake(t *testing.T) {
	t.Parallel()
	f, c := startFakeKind(t, provider.KindCloudflare)
	e := c.(provider.Embedder)
	in := []string{"first story", "second"}
	got, err := e.Embed(t.Context(), provider.EmbeddingRequest{Model: bge, Embedding: provider.Embedding{Input: in, EncodingFormat: "base64"}})
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	want := &provider.EmbeddingResponse{Vectors: fakeVectors(in, 8), Status: 200}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Embed mismatch (-want +got):\n%s", diff)
	}
	calls := f.Calls()
	if len(calls) != 1 || calls[0].Model != bge {
		t.Fatalf("calls = %+v, want one to %s", calls, bge)
	}
	if diff := cmp.Diff(map[string]any{"text": []any{"first story", "second"}}, decodeJSON(t, calls[0].Body)); diff != "" {
		t.Errorf("body sent mismatch (-want +got):\n%s", diff)
	}
}

// What Workers AI cannot carry is refused by name, before any call.
func TestWorkersAIEmbedRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		emb   provider.Embedding
		field string
	}{
		{provider.Embedding{Input: []string{"a"}, Dimensions: 256}, "dimensions"},
		{provider.Embedding{Input: []string{"a"}, User: "u"}, "user"},
	}
	for _, tt := range tests {
		f, c := startFakeKind(t, provider.KindCloudflare)
		var u *provider.Unsupported
		if err := c.(provider.EmbeddingChecker).CheckEmbedding(tt.emb); !errors.As(err, &u) || u.Field != tt.field {
			t.Errorf("CheckEmbedding(%+v) = %v, want unsupported %s", tt.emb, err, tt.field)
		}
		_, err := c.(provider.Embedder).Embed(t.Context(), provider.EmbeddingRequest{Model: bge, Embedding: tt.emb})
		if pe := asError(t, err); pe.Class != provider.ClassRejected || pe.Code != provider.CodeInvalidRequest {
			t.Errorf("Embed(%+v) = %v, want rejected invalid_request", tt.emb, pe)
		}
		if n := f.CallCount(); n != 0 {
			t.Errorf("provider calls = %d, want 0", n)
		}
	}
}

func base64Floats(xs ...float32) string {
	return base64.StdEncoding.EncodeToString(provider.EncodeVector(xs))
}

// Failures classify as a chat's do; an answer that is not one finite
// vector per input, all of one length, is malformed.
func TestEmbedScripted(t *testing.T) {
	t.Parallel()
	two := []string{"a", "b"}
	list := func(data string) string {
		return `{"object":"list","data":` + data + `,"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`
	}
	cf := func(result string) string {
		return `{"result":` + result + `,"success":true,"errors":[],"messages":[]}`
	}
	tests := []struct {
		name    string
		kind    string
		script  fake.Scripted
		dims    int
		want    [][]float32
		wantErr *provider.Error
	}{
		{name: "rate limited", kind: provider.KindOpenAI, script: fake.Scripted{Status: 429, Headers: map[string]string{"Retry-After": "7"},
			Body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
			wantErr: &provider.Error{Class: provider.ClassThrottled, Status: 429, Code: provider.CodeRateLimited}},
		{name: "server error", kind: provider.KindOpenAI, script: fake.Scripted{Status: 500, Body: `{"error":{"message":"boom","type":"server_error"}}`},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 500, Code: provider.CodeServerError}},
		{name: "quota in a 200", kind: provider.KindOpenAI, script: fake.Scripted{Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 200, Code: provider.CodeInsufficientQuota}},
		{name: "indices out of order", kind: provider.KindOpenAI,
			script: fake.Scripted{Body: list(`[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]`)},
			want:   [][]float32{{1, 2}, {3, 4}}},
		{name: "one vector short", kind: provider.KindOpenAI, script: fake.Scripted{Body: list(`[{"index":0,"embedding":[1,2]}]`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "an index twice", kind: provider.KindOpenAI, script: fake.Scripted{Body: list(`[{"index":0,"embedding":[1,2]},{"index":0,"embedding":[1,2]}]`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "lengths differ", kind: provider.KindOpenAI, script: fake.Scripted{Body: list(`[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "not the dimensions asked", kind: provider.KindOpenAI, dims: 3,
			script:  fake.Scripted{Body: list(`[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "base64 NaN", kind: provider.KindOpenAI,
			script:  fake.Scripted{Body: list(`[{"index":0,"embedding":"` + base64Floats(1, float32(math.NaN())) + `"},{"index":1,"embedding":"` + base64Floats(1, 2) + `"}]`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "base64 answer", kind: provider.KindOpenAI,
			script: fake.Scripted{Body: list(`[{"index":0,"embedding":"` + base64Floats(0.5, -2) + `"},{"index":1,"embedding":"` + base64Floats(1, 2) + `"}]`)},
			want:   [][]float32{{0.5, -2}, {1, 2}}},
		{name: "empty vector", kind: provider.KindCloudflare, script: fake.Scripted{Body: cf(`{"shape":[2,0],"data":[[],[]]}`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "shape disagrees", kind: provider.KindCloudflare, script: fake.Scripted{Body: cf(`{"shape":[2,3],"data":[[1,2],[3,4]]}`)},
			wantErr: &provider.Error{Class: provider.ClassTransient, Status: 200, Code: provider.CodeMalformedResponse}},
		{name: "daily allocation used", kind: provider.KindCloudflare,
			script:  fake.Scripted{Status: 429, Body: `{"result":null,"success":false,"errors":[{"code":3036,"message":"you have used up your daily free allocation"}],"messages":[]}`},
			wantErr: &provider.Error{Class: provider.ClassExhausted, Status: 429, Code: provider.CodeInsufficientQuota}},
		{name: "workers answer", kind: provider.KindCloudflare, script: fake.Scripted{Body: cf(`{"shape":[2,2],"data":[[1,2],[3,4]]}`)},
			want: [][]float32{{1, 2}, {3, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := startFakeKind(t, tt.kind)
			f.Script(tt.script)
			got, err := c.(provider.Embedder).Embed(t.Context(), provider.EmbeddingRequest{Model: "m", Embedding: provider.Embedding{Input: two, Dimensions: tt.dims}})
			if tt.wantErr != nil {
				pe := asError(t, err)
				if pe.Class != tt.wantErr.Class || pe.Status != tt.wantErr.Status || pe.Code != tt.wantErr.Code {
					t.Errorf("error = %v, want %v", pe, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if diff := cmp.Diff(tt.want, got.Vectors); diff != "" {
				t.Errorf("vectors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVectorEncoding(t *testing.T) {
	t.Parallel()
	v := []float32{0, 1.5, -0.25, math.MaxFloat32, math.SmallestNonzeroFloat32}
	if diff := cmp.Diff(v, provider.DecodeVector(provider.EncodeVector(v))); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	// OpenAI's base64 embeddings are little-endian float32: 1.0 is 00 00 80 3f.
	if got := provider.EncodeVector([]float32{1}); string(got) != "\x00\x00\x80\x3f" {
		t.Errorf("EncodeVector(1) = % x", got)
	}
}
