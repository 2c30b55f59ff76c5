package provider

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Kinds of provider: the wire formats New and Classify speak.
const (
	KindOpenAI     = "openai"     // OpenAI chat completions, and the servers that copy it
	KindAnthropic  = "anthropic"  // Anthropic Messages
	KindCloudflare = "cloudflare" // Cloudflare Workers AI REST
)

// Kinds lists the kinds New and Classify accept.
func Kinds() []string { return []string{KindOpenAI, KindAnthropic, KindCloudflare} }

// Options configures the Client that New returns.
type Options struct {
	// BaseURL is where the provider's API lives; "" means the public one:
	// "https://api.openai.com/v1" (openai: /v1 included), and the roots
	// without a version "https://api.anthropic.com" (anthropic) and
	// "https://api.cloudflare.com" (cloudflare).
	BaseURL string
	// APIKey is the bearer token (openai, cloudflare) or x-api-key
	// (anthropic). It is never part of an error.
	APIKey string
	// AccountID is the Cloudflare account; required for cloudflare, ignored
	// otherwise.
	AccountID string
	// HTTPClient makes the calls; nil means a plain http.Client. Redirects are never
	// followed, whatever its CheckRedirect (NoRedirects). Deadlines
	// come from the ctx passed to Complete.
	HTTPClient *http.Client
	// Responses says how an openai client takes a request made in
	// OpenAI's Responses API: ResponsesAuto (""), ResponsesNative or
	// ResponsesChat (openai_responses.go). Ignored for other kinds.
	Responses string
}

var defaultBaseURL = map[string]string{
	KindOpenAI:     "https://api.openai.com/v1",
	KindAnthropic:  "https://api.anthropic.com",
	KindCloudflare: "https://api.cloudflare.com",
}

// New returns the Client for kind (KindOpenAI, KindAnthropic or
// KindCloudflare). It fails, without any network call, for an unknown kind,
// an unknown Responses mode,
// a BaseURL that is not an absolute http(s) URL, or a cloudflare client
// without an AccountID.
func New(kind string, opts Options) (Client, error) {
	base, ok := defaultBaseURL[kind]
	if !ok {
		return nil, fmt.Errorf("provider: unknown kind %q (want one of %s)", kind, strings.Join(Kinds(), ", "))
	}
	if opts.BaseURL != "" {
		base = opts.BaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider: %s base URL must be an absolute http(s) URL", kind)
	}
	if r := opts.Responses; r != ResponsesAuto && r != ResponsesNative && r != ResponsesChat {
		return nil, fmt.Errorf("provider: responses must be %s or %s, not %q", ResponsesNative, ResponsesChat, r)
	}
	switch kind {
	case KindAnthropic:
		return NewAnthropic(base, opts.APIKey, opts.HTTPClient), nil
	case KindCloudflare:
		if opts.AccountID == "" {
			return nil, fmt.Errorf("provider: cloudflare needs an AccountID")
		}
		return NewCloudflare(base, opts.AccountID, opts.APIKey, opts.HTTPClient), nil
	}
	c := NewOpenAI(base, opts.APIKey, opts.HTTPClient)
	c.responses = opts.Responses
	return c, nil
}

// Classify classifies a non-2xx response in kind's wire format with the
// classifier that kind's Client uses (ClassifyOpenAI, ClassifyAnthropic or
// ClassifyCloudflare). It returns an error only for an unknown kind.
func Classify(kind string, status int, header http.Header, body []byte) (*Error, error) {
	switch kind {
	case KindOpenAI:
		return ClassifyOpenAI(status, header, body), nil
	case KindAnthropic:
		return ClassifyAnthropic(status, header, body), nil
	case KindCloudflare:
		return ClassifyCloudflare(status, header, body), nil
	}
	return nil, fmt.Errorf("provider: unknown kind %q (want one of %s)", kind, strings.Join(Kinds(), ", "))
}
