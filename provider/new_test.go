package provider_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
)

// recordURL is a transport that records the URL of the one request it sees
// and answers with an error, so that nothing leaves the machine.
type recordURL struct{ got chan string }

func (r recordURL) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got <- req.URL.String()
	return nil, errors.New("recorded")
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind string
		opts provider.Options
		want string
	}{
		{provider.KindOpenAI, provider.Options{}, "https://api.openai.com/v1/chat/completions"},
		{provider.KindAnthropic, provider.Options{}, "https://api.anthropic.com/v1/messages"},
		{provider.KindCloudflare, provider.Options{AccountID: "acc"}, "https://api.cloudflare.com/client/v4/accounts/acc/ai/run/@cf/m"},
		{provider.KindOpenAI, provider.Options{BaseURL: "http://llama.local:8080/v1/"}, "http://llama.local:8080/v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.opts.BaseURL, func(t *testing.T) {
			t.Parallel()
			rec := recordURL{got: make(chan string, 1)}
			tt.opts.HTTPClient = &http.Client{Transport: rec}
			c, err := provider.New(tt.kind, tt.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			_, err = c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "@cf/m", MaxTokens: 1}})
			if pe := asError(t, err); pe.Code != provider.CodeConnectionError {
				t.Errorf("Complete error = %v, want connection_error from the recording transport", pe)
			}
			if got := <-rec.got; got != tt.want {
				t.Errorf("request URL = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewTypes(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		provider.KindOpenAI:     "*provider.OpenAI",
		provider.KindAnthropic:  "*provider.Anthropic",
		provider.KindCloudflare: "*provider.Cloudflare",
	} {
		c, err := provider.New(kind, provider.Options{AccountID: "acc"})
		if err != nil {
			t.Fatalf("New(%q): %v", kind, err)
		}
		if got := fmt.Sprintf("%T", c); got != want {
			t.Errorf("New(%q) = %s, want %s", kind, got, want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    string
		opts    provider.Options
		wantErr string
	}{
		{"unknown kind", "gemini", provider.Options{}, `unknown kind "gemini"`},
		{"empty kind", "", provider.Options{}, `unknown kind ""`},
		{"cloudflare without account", provider.KindCloudflare, provider.Options{APIKey: apiKey}, "AccountID"},
		{"relative base URL", provider.KindOpenAI, provider.Options{BaseURL: "/v1"}, "absolute http(s) URL"},
		{"other scheme", provider.KindAnthropic, provider.Options{BaseURL: "ftp://api.anthropic.com"}, "absolute http(s) URL"},
		{"unparsable base URL", provider.KindAnthropic, provider.Options{BaseURL: "http://a b\x7f"}, "absolute http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := provider.New(tt.kind, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New = %v, %v; want an error containing %q", c, err, tt.wantErr)
			}
			if c != nil {
				t.Errorf("New returned a client %v with its error", c)
			}
			if strings.Contains(err.Error(), apiKey) {
				t.Errorf("error %q contains the API key", err)
			}
		})
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	want := []string{"openai", "anthropic", "cloudflare"}
	if diff := cmp.Diff(want, provider.Kinds()); diff != "" {
		t.Errorf("Kinds() mismatch (-want +got):\n%s", diff)
	}
}
