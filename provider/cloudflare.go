package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Cloudflare is a Client for the Cloudflare Workers AI REST API. It is safe
// for concurrent use.
type Cloudflare struct {
	prefix   string // up to and including .../ai/run/
	apiToken string
	hc       *http.Client
}

var _ Client = (*Cloudflare)(nil)

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

type workersAIRequest struct {
	Messages  []Message `json:"messages"`
	MaxTokens int       `json:"max_tokens,omitempty"`
	// ResponseFormat switches on JSON mode; the answer then nests as an
	// object under result.response.
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

// Complete sends req once; the model is part of the URL, its slashes
// ("@cf/meta/llama-3.1-8b-instruct") kept as path separators. On failure it
// returns a *Error as OpenAI.Complete does, classified by ClassifyCloudflare;
// and ClassRejected "invalid_request", without sending anything, for a model
// name that is empty or holds an empty, "." or ".." segment, which would
// address another path of the Cloudflare API with our token.
func (c *Cloudflare) Complete(ctx context.Context, req Request) (*Response, error) {
	path, err := modelPath(req.Model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	h := http.Header{}
	if c.apiToken != "" {
		h.Set("Authorization", "Bearer "+c.apiToken)
	}
	return call{
		hc:       c.hc,
		url:      c.prefix + path,
		header:   h,
		payload:  workersAIRequest{Messages: msgs, MaxTokens: req.OutputLimit(), ResponseFormat: jsonMode(req.ResponseFormat)},
		key:      req.IdempotencyKey,
		classify: ClassifyCloudflare,
		parse:    parseWorkersAI,
	}.do(ctx)
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

type workersAIResponse struct {
	Result  json.RawMessage   `json:"result"`
	Success *bool             `json:"success"`
	Errors  []json.RawMessage `json:"errors"`
}

type workersAIResult struct {
	// Response is a string, or a JSON object in JSON mode; null or absent
	// when the model only called tools.
	Response json.RawMessage `json:"response"`
	Usage    *struct {
		PromptTokens     tokenCount `json:"prompt_tokens"`
		CompletionTokens tokenCount `json:"completion_tokens"`
	} `json:"usage"`
	// Choices: some newer models answer in the OpenAI shape inside result.
	Choices json.RawMessage `json:"choices"`
}

// parseWorkersAI turns a 2xx envelope into a Response, or into a *Error when
// it reports a failure or holds no usable output. Workers AI reports neither
// the model nor a finish reason, so both stay empty.
func parseWorkersAI(status int, header http.Header, body []byte) (*Response, error) {
	var env workersAIResponse
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, malformed(status, err)
	}
	if (env.Success != nil && !*env.Success) || len(env.Errors) > 0 {
		return nil, ClassifyCloudflare(status, header, body)
	}
	if !isJSONObject(env.Result) {
		return nil, malformed(status, nil)
	}
	var res workersAIResult
	if err := json.Unmarshal(env.Result, &res); err != nil {
		return nil, malformed(status, err)
	}
	if !hasJSON(res.Response) && hasJSON(res.Choices) {
		return parseCompletion(status, header, env.Result)
	}
	content, ok := workersAIText(res.Response)
	if !ok {
		return nil, malformed(status, nil)
	}
	if strings.TrimSpace(content) == "" {
		return nil, &Error{Class: ClassTransient, Status: status, Code: CodeEmptyOutput}
	}
	r := TextResponse(content, "")
	r.Status = status
	if res.Usage != nil {
		r.Usage = &Usage{InputTokens: int64(res.Usage.PromptTokens), OutputTokens: int64(res.Usage.CompletionTokens)}
	}
	return r, nil
}

// workersAIText reads result.response: a string as is, an object or array
// (JSON mode) re-encoded as compact JSON text, null or absent as "". It
// reports false for any other shape.
func workersAIText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if !hasJSON(raw) {
		return "", true
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	case '{', '[':
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return "", false
		}
		return b.String(), true
	}
	return "", false
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
