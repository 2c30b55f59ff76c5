package server

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// Bounds on what a request carries outside its body. Every value Tollgate
// reads is far shorter; a longer one is refused before it reaches a
// handler, a log line or the database.
const (
	maxQueryValue  = 2048
	maxPathValue   = 256
	maxHeaderValue = 1024
)

// readHeaders are the request headers handlers read (Authorization is the
// authenticator's own, and a key is only ever hashed).
var readHeaders = []string{"Idempotency-Key", "Prefer", "X-Reason", "anthropic-version", "anthropic-beta"}

// checkParams refuses, before any handler runs (and before authentication), a query parameter, a path
// parameter or a header Tollgate reads that holds a NUL, invalid UTF-8 or
// more than its bound, with a 400 naming it. PostgreSQL refuses NUL and
// invalid UTF-8 in text, so such a value would otherwise turn a lookup
// into a 500. Bodies get the same checks in scanJSON.
func checkParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := paramsProblem(c); err != nil {
			return err
		}
		return next(c)
	}
}

func paramsProblem(c echo.Context) error {
	q := c.QueryParams()
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names) // the same request always names the same field
	for _, name := range names {
		if msg := textProblem(name, maxPathValue); msg != "" {
			return paramErr(displayName(name), "query parameter name", msg)
		}
		for _, v := range q[name] {
			if msg := textProblem(v, maxQueryValue); msg != "" {
				return paramErr(name, "query parameter", msg)
			}
		}
	}
	for i, name := range c.ParamNames() {
		if i < len(c.ParamValues()) {
			if msg := textProblem(c.ParamValues()[i], maxPathValue); msg != "" {
				return paramErr(name, "path segment", msg)
			}
		}
	}
	for _, name := range readHeaders {
		for _, v := range c.Request().Header.Values(name) {
			if msg := textProblem(v, maxHeaderValue); msg != "" {
				return paramErr(name, "header", msg)
			}
		}
	}
	return nil
}

// textProblem says what is wrong with a text value, or "".
func textProblem(s string, max int) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain a NUL character"
	case len(s) > max:
		return fmt.Sprintf("must be at most %d bytes", max)
	}
	return ""
}

func paramErr(name, kind, msg string) error {
	return badRequest(fmt.Sprintf("The %s %q %s.", kind, name, msg), tasks.FieldError{Field: name, Message: msg})
}

// displayName is a client's parameter name made safe to show.
func displayName(name string) string {
	if len(name) > maxPathKey {
		name = name[:maxPathKey]
	}
	q := strconv.QuoteToASCII(name)
	return q[1 : len(q)-1]
}
