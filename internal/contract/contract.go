package contract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Validator matches HTTP exchanges against a loaded OpenAPI document.
// It is safe for concurrent use.
type Validator struct {
	router routers.Router
	opts   *openapi3filter.Options
}

var registerDecoders sync.Once

// Load reads the OpenAPI document at path, validates it and prepares a
// router for it. It returns an error if the file cannot be read or parsed,
// or if the document is not a valid OpenAPI document.
func Load(path string) (*Validator, error) {
	// Streams are checked as text: their content type and status are what
	// the contract fixes; the events follow OpenAI's chunk format.
	registerDecoders.Do(func() {
		openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("contract: load %s: %w", path, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("contract: validate %s: %w", path, err)
	}

	// kin-openapi checks "uuid" only when told how; scope the check to this
	// document rather than registering it globally.
	doc.SetStringFormatValidator("uuid",
		openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))

	// The router would otherwise only match requests to the spec's server
	// (http://127.0.0.1:8080), while tests hit httptest servers on random
	// ports. Our server URL has no base path, so dropping the servers loses
	// nothing but the host match.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("contract: router for %s: %w", path, err)
	}

	return &Validator{
		router: router,
		opts: &openapi3filter.Options{
			// Tests send invalid requests on purpose: check responses only.
			ExcludeRequestBody:        true,
			ExcludeRequestQueryParams: true,
			IncludeResponseStatus:     true,
			MultiError:                true,
			AuthenticationFunc:        openapi3filter.NoopAuthenticationFunc,
			// Mismatch quotes the body once instead of kin-openapi dumping
			// the schema and the value into every error.
			SchemaValidationOptions: append(doc.GetSchemaValidationOptions(),
				openapi3.DisableSchemaErrorDetails()),
		},
	}, nil
}

// Transport returns a RoundTripper that sends requests through next
// (http.DefaultTransport when nil) and validates every exchange against
// the contract. Mismatches do not fail the round trip: they are collected
// for Errors and Check, and the caller still gets the response, body intact.
func (v *Validator) Transport(next http.RoundTripper) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{v: v, next: next}
}

// Transport is an http.RoundTripper that records contract mismatches.
// It is safe for concurrent use.
type Transport struct {
	v    *Validator
	next http.RoundTripper

	mu   sync.Mutex
	errs []error
}

// RoundTrip implements http.RoundTripper. It returns the error of the
// wrapped transport, or an error if the response body cannot be read;
// contract mismatches are recorded, not returned.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	route, pathParams, routeErr := t.v.router.FindRoute(req)

	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}

	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("contract: read response body of %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))

	mismatch := func(err error) *Mismatch {
		return &Mismatch{Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode, Body: body, Err: err}
	}
	if routeErr != nil {
		t.record(mismatch(fmt.Errorf("request not in contract: %w", routeErr)))
		return resp, nil
	}

	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams,
			Route:      route,
			Options:    t.v.opts,
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: t.v.opts,
	}
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		t.record(mismatch(err))
	}
	return resp, nil
}

func (t *Transport) record(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

// Errors returns the mismatches recorded so far, each a *Mismatch, in the
// order they were found. It returns nil when every exchange matched.
func (t *Transport) Errors() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.errs) == 0 {
		return nil
	}
	return append([]error(nil), t.errs...)
}

// Check reports every recorded mismatch with tb.Errorf. Call it at the end
// of a test, or register it with tb.Cleanup.
func (t *Transport) Check(tb testing.TB) {
	tb.Helper()
	for _, err := range t.Errors() {
		tb.Errorf("%v", err)
	}
}

// Mismatch is an exchange that does not match the contract.
type Mismatch struct {
	Method string
	Path   string
	Status int
	Body   []byte // the response body, as received
	// Err is kin-openapi's reason: a routers.RouteError for a request
	// not in the contract, an *openapi3filter.ResponseError otherwise.
	Err error
}

// Error names the exchange and gives kin-openapi's reason.
func (m *Mismatch) Error() string {
	msg := fmt.Sprintf("contract: %s %s → %d: %v", m.Method, m.Path, m.Status, m.Err)
	if len(m.Body) == 0 {
		return msg
	}
	const maxBody = 2048
	body, more := m.Body, ""
	if len(body) > maxBody {
		body, more = body[:maxBody], fmt.Sprintf(" … (%d bytes in all)", len(m.Body))
	}
	return fmt.Sprintf("%s\n\tbody: %s%s", msg, body, more)
}

// Unwrap returns Err.
func (m *Mismatch) Unwrap() error { return m.Err }
