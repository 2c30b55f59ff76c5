package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

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
	body := http.MaxBytesReader(c.Response(), c.Request().Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	err := dec.Decode(dst)
	if err == nil {
		// Exactly one JSON value: anything but whitespace after it is an error.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			}
		}
	}
	return decodeError(err)
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
