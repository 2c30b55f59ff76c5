package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// The Anthropic surface: code written against Anthropic's SDKs points its
// base URL at Tollgate and keeps working, and every call becomes a
// Tollgate task with its reservation, classified failures and replay
// record, whichever provider runs it.

// antHeader is what a Messages call's headers ask of the call: the
// anthropic-version the client speaks and its anthropic-beta values,
// both sent on to Anthropic providers as they came. Other providers get
// the request translated; the version names the client's dialect, which
// Tollgate reads whatever date it carries.
type antHeader struct {
	version string
	betas   []string
}

// antHeaders reads the anthropic-version and anthropic-beta headers. A
// version, when sent, must be a date (YYYY-MM-DD), as every Anthropic
// version is; the beta values (comma-separated, in one header or several)
// are kept in order.
func antHeaders(h http.Header) (antHeader, error) {
	var out antHeader
	if v := h.Get("anthropic-version"); v != "" {
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return antHeader{}, antFieldError("anthropic-version", "must be a version date such as "+provider.AnthropicVersion)
		}
		out.version = v
	}
	for _, line := range h.Values("anthropic-beta") {
		for _, b := range strings.Split(line, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out.betas = append(out.betas, b)
			}
		}
	}
	return out, nil
}

// decodeAnthropic decodes a Messages request body: JSON only (see
// readBody), every field and type checked (scanJSON), the top-level
// fields the request type does not know collected to be refused by name
// (antRequest.task).
func decodeAnthropic(c echo.Context, limit int64, dst passthroughSink) error {
	raw, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBytes(raw, dst, scanLenient, "")
}

// anthropicMessages is Anthropic's Messages dialect: POST /v1/messages.
type anthropicMessages struct{ antErrors }

// antCall is what answering a Messages call needs of its request: the
// paths that name its fields in Anthropic's terms.
type antCall struct{ paths antPaths }

func (anthropicMessages) decode(c echo.Context, d *Deps) (antCall, admission, error) {
	c.Response().Header().Set("request-id", antRequestID(c))
	hdr, err := antHeaders(c.Request().Header)
	if err != nil {
		return antCall{}, admission{}, err
	}
	raw, err := readBody(c, d.MaxBodyBytes)
	if err != nil {
		return antCall{}, admission{}, err
	}
	return decodeMessages(raw, hdr)
}

// decodeMessages is a Messages body, with what its headers asked, as a
// call and its admission; the body is carried natively
// (anthropic_native.go).
func decodeMessages(raw []byte, hdr antHeader) (antCall, admission, error) {
	var in antRequest
	if err := decodeCarried(raw, &in); err != nil {
		return antCall{}, admission{}, err
	}
	req, paths, err := in.task(hdr, false)
	if err != nil {
		return antCall{}, admission{}, err
	}
	req = carried(req, raw, hdr, paths)
	return antCall{paths: paths}, admission{req: req, stream: in.Stream, keyPrefix: "msg/",
		badKey: antFieldError("Idempotency-Key", "must be 1-255 printable ASCII characters")}, nil
}

func (anthropicMessages) refused(call antCall, err error) error { return call.paths.antFields(err) }

func (anthropicMessages) answer(c echo.Context, _ *Deps, _ antCall, t tasks.Task) error {
	if body := antNativeAnswer(t); body != nil {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	}
	m, err := antMessageOf(t)
	if err != nil {
		return err
	}
	return writeJSON(c, m)
}

func (anthropicMessages) streamLive(c echo.Context, d *Deps, _ antCall, created tasks.Created) error {
	return streamMessage(c, d, created)
}

// streamStored writes a replayed stream: the provider's events as it
// sent them when the stream was carried natively, else rebuilt from the
// stored answer.
func (anthropicMessages) streamStored(c echo.Context, _ *Deps, _ antCall, t tasks.Task) error {
	s := newAntStream(c, t)
	if events := antNativeEvents(t); events != nil {
		for i := range events {
			s.relay(&events[i])
		}
		return nil
	}
	if _, err := antMessageOf(t); err != nil {
		return err
	}
	s.replay(t)
	s.finish(t)
	return nil
}

// countTokens: POST /v1/messages/count_tokens, Tollgate's own estimate of
// the prompt, the figure its reservation starts from.
func countTokens(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("request-id", antRequestID(c))
		hdr, err := antHeaders(c.Request().Header)
		if err != nil {
			return err
		}
		var in antCountRequest
		if err := decodeAnthropic(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		req, paths, err := in.request().task(hdr, true)
		if err != nil {
			return err
		}
		n, err := d.Tasks.InputTokens(req)
		if err != nil {
			return paths.antFields(err)
		}
		return c.JSON(http.StatusOK, map[string]int64{"input_tokens": n})
	}
}
