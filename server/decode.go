package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// decodeJSON reads a JSON body strictly: JSON only (see readBody), at
// most limit bytes, no unknown fields, one value, numbers kept exact,
// every string and number checked at this edge (scanJSON). Its errors say
// what is wrong and where, never echoing the body.
func decodeJSON(c echo.Context, limit int64, dst any) error {
	raw, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBytes(raw, dst, scanStrict, "")
}

// passthroughSink is a body that keeps the unknown top-level fields a
// lenient decode finds (the OpenAI request, which passes them on).
type passthroughSink interface {
	setPassthrough(map[string]json.RawMessage)
}

// decodeBytes checks raw, found at root in the request ("" for the body),
// with scanJSON against dst's type, then decodes it into dst. In
// scanLenient mode unknown top-level fields are handed to dst when it is
// a passthroughSink, and ignored otherwise.
func decodeBytes(raw []byte, dst any, mode scanMode, root string) error {
	body, extra, err := scanJSON(raw, reflect.TypeOf(dst), mode, root)
	if err != nil {
		return decodeError(err)
	}
	if sink, ok := dst.(passthroughSink); ok && extra != nil {
		sink.setPassthrough(extra)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if mode == scanStrict {
		dec.DisallowUnknownFields()
	}
	dec.UseNumber()
	return decodeError(dec.Decode(dst))
}

// readBody reads at most limit bytes of a JSON body. Every route that
// takes a body reads it here, so one Content-Type rule holds on all of
// them: a body without Content-Type, or with application/json or a +json
// type (parameters such as charset allowed), is read as JSON; any other
// type (curl -d's application/x-www-form-urlencoded) is a 415 that says
// what to send. The OpenAI and Anthropic SDKs send application/json.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	if err := jsonContentType(c.Request().Header.Get(echo.HeaderContentType)); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	if err != nil {
		return nil, decodeError(err)
	}
	return raw, nil
}

// jsonContentType is readBody's Content-Type rule: nil for a JSON body,
// else the 415.
func jsonContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
		detail: "The request body must be JSON: send Content-Type: application/json (curl -d sends application/x-www-form-urlencoded; add -H 'Content-Type: application/json' or use curl --json)."}
}

var errTrailing = errors.New("trailing data")

func decodeError(err error) error {
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var ae *apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.Is(err, io.EOF):
		return badRequest("The request body is empty; send a JSON object.")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("The request body is truncated JSON.")
	case errors.Is(err, errTrailing):
		return badRequest("The request body must hold exactly one JSON value.")
	case errors.As(err, &syn):
		return badRequest(fmt.Sprintf("The request body is not valid JSON (at byte %d).", syn.Offset))
	case errors.As(err, &typ):
		// scanJSON checks types first; this is a fallback that still
		// never names a Go type or a Go field path.
		field := typ.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		if field == "" {
			field = "body"
		}
		return fieldErr(field, "must be "+kindName(typ.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(fmt.Sprintf("Unknown field %q.", name), tasks.FieldError{Field: name, Message: "unknown field"})
	}
	return badRequest("The request body could not be decoded.")
}

// tooLarge is the 413 for a body above limit bytes, naming the limit.
func tooLarge(limit int64) error {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: "payload_too_large",
		detail: fmt.Sprintf("The request body is larger than the limit of %d bytes (TOLLGATE_MAX_BODY_BYTES).", limit)}
}
