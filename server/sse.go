package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// eventStream writes server-sent events, the one writer every dialect's
// stream uses: the status and headers once, then each event written and
// flushed. It notices a client that went away and writes nothing more.
type eventStream struct {
	c       echo.Context
	started bool
	gone    bool
}

// begin sends the status and the event-stream headers, once.
func (w *eventStream) begin() {
	if w.started {
		return
	}
	w.started = true
	h := w.c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.c.Response().WriteHeader(http.StatusOK)
	w.c.Response().Flush()
}

// event writes one event named name ("" writes data alone, as OpenAI's
// chat chunks come) holding v as JSON, opening the stream first. It
// reports false once the client is gone.
func (w *eventStream) event(name string, v any) bool {
	if w.gone {
		return false
	}
	w.begin()
	b, _ := json.Marshal(v)
	var err error
	if name == "" {
		_, err = fmt.Fprintf(w.c.Response(), "data: %s\n\n", b)
	} else {
		_, err = fmt.Fprintf(w.c.Response(), "event: %s\ndata: %s\n\n", name, b)
	}
	if err != nil || w.c.Request().Context().Err() != nil {
		w.gone = true
		return false
	}
	w.c.Response().Flush()
	return true
}

// raw writes s as it is (an SSE comment or terminator such as OpenAI's
// "data: [DONE]"), opening the stream first; false once the client is
// gone.
func (w *eventStream) raw(s string) bool {
	if w.gone {
		return false
	}
	w.begin()
	if _, err := fmt.Fprint(w.c.Response(), s); err != nil || w.c.Request().Context().Err() != nil {
		w.gone = true
		return false
	}
	w.c.Response().Flush()
	return true
}
