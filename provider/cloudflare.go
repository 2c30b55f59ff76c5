package provider

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Cloudflare is a Client for the Cloudflare Workers AI REST API. It is safe
// for concurrent use. Workers AI's input is narrower than Chat: Check
// names the first field it cannot carry, and Complete and Stream refuse
// the same requests without sending them, translating the rest.
type Cloudflare struct {
	prefix   string // up to and including .../ai/run/
	apiToken string
	hc       *http.Client
}

var (
	_ Client   = (*Cloudflare)(nil)
	_ Streamer = (*Cloudflare)(nil)
	_ Checker  = (*Cloudflare)(nil)
)

// NewCloudflare returns a client that POSTs to
// baseURL + "/client/v4/accounts/{accountID}/ai/run/{model}" with apiToken as
// a bearer token. baseURL is the host root ("https://api.cloudflare.com"); a
// trailing "/client/v4" is dropped, so both spellings reach the same
// endpoint. A nil hc means a plain http.Client; redirects are never followed
// (NoRedirects); deadlines come from the ctx passed to Complete.
func NewCloudflare(baseURL, accountID, apiToken string, hc *http.Client) *Cloudflare {
	hc = NoRedirects(hc)
	root := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/client/v4")
	return &Cloudflare{
		prefix:   root + "/client/v4/accounts/" + url.PathEscape(accountID) + "/ai/run/",
		apiToken: apiToken,
		hc:       hc,
	}
}

// Complete sends req once, translated to Workers AI's input (see
// Check); the model is part of the URL, its slashes
// ("@cf/meta/llama-3.1-8b-instruct") kept as path separators. On failure
// it returns a *Error as OpenAI.Complete does, classified by
// ClassifyCloudflare; and ClassRejected "invalid_request", without
// sending anything, for a request Check refuses (the *Unsupported is its
// cause) or a model name that is empty or holds an empty, "." or ".."
// segment, which would address another path of the Cloudflare API with
// our token.
func (c *Cloudflare) Complete(ctx context.Context, req Request) (*Response, error) {
	path, err := modelPath(req.Model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	body, err := workersAIBody(req.Chat)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	return call{
		hc:       c.hc,
		url:      c.prefix + path,
		header:   c.headers(),
		payload:  body,
		key:      req.IdempotencyKey,
		classify: ClassifyCloudflare,
		parse:    parseWorkersAI,
	}.do(ctx)
}

func (c *Cloudflare) headers() http.Header {
	h := http.Header{}
	if c.apiToken != "" {
		h.Set("Authorization", "Bearer "+c.apiToken)
	}
	return h
}

// modelPath escapes each segment of a model name and keeps its slashes.
func modelPath(model string) (string, error) {
	segs := strings.Split(model, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", errors.New("provider: Workers AI model name must be non-empty segments separated by /")
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/"), nil
}

// ClassifyCloudflare classifies a non-2xx response from the Workers AI REST
// API, whose errors read {"success":false,"errors":[{"code":N,"message":...}]}.
// It always returns a non-nil *Error. The internal code decides first (see
// cloudflareCode), then the order of ClassifyOpenAI: hints in the message,
// then the status, so a 429 without a known code is throttled and an unknown
// 4xx rejected.
func ClassifyCloudflare(status int, header http.Header, body []byte) *Error {
	return classifyCloudflare(status, header, body, time.Now)
}

func classifyCloudflare(status int, header http.Header, body []byte, now func() time.Time) *Error {
	return classify(status, header, body, now, cloudflareCodes)
}

// leadingCode finds an internal code that prefixes the message ("4006: you
// have used up your daily free allocation"), as the Workers binding and the
// OpenAI-compatible endpoint report it.
var leadingCode = regexp.MustCompile(`^\s*(\d{4,5})\s*:`)

func cloudflareCodes(f errorFields) (Class, string, bool) {
	if class, code, ok := cloudflareCode(f.code); ok {
		return class, code, true
	}
	if m := leadingCode.FindStringSubmatch(f.msg); m != nil {
		return cloudflareCode(m[1])
	}
	return "", "", false
}

// cloudflareCode knows the Workers AI internal codes
// (developers.cloudflare.com/workers-ai/platform/errors) and the Cloudflare
// API's authentication codes.
func cloudflareCode(code string) (Class, string, bool) {
	switch code {
	case "3036", "4006": // daily free allocation of neurons used up
		return ClassExhausted, CodeInsufficientQuota, true
	case "3040": // out of capacity: no data centre could take the request
		return ClassTransient, CodeOverloaded, true
	case "3007": // Workers AI timed the request out: see CodeUpstreamTimeout
		return ClassTransient, CodeUpstreamTimeout, true
	case "3008": // request aborted
		return ClassTransient, CodeRequestTimeout, true
	case "10000", "9109", "9106", "9107": // authentication failed, token refused or missing
		return ClassExhausted, CodeUnauthorized, true
	case "3023": // account blocked
		return ClassExhausted, CodeAccountDisabled, true
	case "5035", "5018", "3041", "5016":
		// The model needs another plan, a private-model grant or an
		// agreement: only requests for that model fail, so the request is
		// rejected and the account stays usable.
		return ClassRejected, CodeForbidden, true
	case "5007", "3042": // no such model, invalid model name
		return ClassRejected, CodeNotFound, true
	case "5021", "3010": // input plus max_tokens exceed the model's context window
		return ClassRejected, CodeContextLength, true
	case "3006":
		return ClassRejected, CodeRequestTooLarge, true
	case "5004", "5006", "3003", "3039", "5005", "5019":
		// invalid or incomplete input, missing fine-tune files, LoRA
		// unsupported, deprecated SDK
		return ClassRejected, CodeInvalidRequest, true
	}
	return "", "", false
}
