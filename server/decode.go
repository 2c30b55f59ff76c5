package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// decodeJSON reads a JSON body strictly: application/json only, at most
// limit bytes, no unknown fields, one value, numbers kept exact. Its errors
// say what is wrong and where, never echoing the body.
func decodeJSON(c echo.Context, limit int64, dst any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return echo.NewHTTPError(http.StatusUnsupportedMediaType)
		}
	}
	raw, err := readBody(c, limit)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	err = dec.Decode(dst)
	if err == nil {
		// Exactly one JSON value: anything but whitespace after it is an error.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
		}
	}
	return decodeError(err)
}

// readBody reads at most limit bytes and refuses what encoding/json would
// silently accept: invalid UTF-8 (it would become U+FFFD) and an object
// with a key twice (the last would win, unseen by whoever wrote the first).
func readBody(c echo.Context, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	if err != nil {
		return nil, decodeError(err)
	}
	if !utf8.Valid(raw) {
		return nil, badRequest("The request body is not valid UTF-8.")
	}
	if key, dup := duplicateKey(raw); dup {
		return nil, badRequest(fmt.Sprintf("The key %q appears twice in one object.", key),
			tasks.FieldError{Field: key, Message: "duplicated key"})
	}
	return raw, nil
}

// duplicateKey walks the JSON tokens and reports the first key repeated
// within one object. Malformed JSON is left to the real decoder.
func duplicateKey(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		expect bool // next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.object {
					top.expect = true
				}
				stack = append(stack, &frame{keys: map[string]bool{}, object: true, expect: true})
			case '[':
				if top != nil && top.object {
					top.expect = true
				}
				stack = append(stack, &frame{})
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].expect = true
				}
			}
		case string:
			if top != nil && top.object && top.expect {
				if top.keys[v] {
					return v, true
				}
				top.keys[v] = true
				top.expect = false
				continue
			}
			if top != nil && top.object {
				top.expect = true
			}
		default:
			if top != nil && top.object {
				top.expect = true
			}
		}
	}
}

var errTrailing = errors.New("trailing data")

func decodeError(err error) error {
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	case errors.Is(err, io.EOF):
		return badRequest("The request body is empty; send a JSON object.")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("The request body is truncated JSON.")
	case errors.Is(err, errTrailing):
		return badRequest("The request body must hold exactly one JSON value.")
	case errors.As(err, &syn):
		return badRequest(fmt.Sprintf("The request body is not valid JSON (at byte %d).", syn.Offset))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return badRequest(fmt.Sprintf("Field %q must be %s.", field, jsonKind(typ.Type.Kind().String())),
			tasks.FieldError{Field: field, Message: "must be " + jsonKind(typ.Type.Kind().String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(fmt.Sprintf("Unknown field %q.", name), tasks.FieldError{Field: name, Message: "unknown field"})
	}
	return badRequest("The request body could not be decoded.")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "of another type"
}
