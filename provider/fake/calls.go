package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// readBody reads a model call's body; a read error leaves it partial, and
// the decoding that follows fails.
func readBody(w http.ResponseWriter, r *http.Request) []byte {
	body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	return body
}

// decodeObject decodes body, which must be a JSON object, into v.
func decodeObject(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return errors.New("request body is not a JSON object")
	}
	return json.Unmarshal(body, v)
}

// log records a model call on any endpoint and pops the next scripted
// response. Logging comes before choosing the answer, so that tests see
// every call, including ones that fail.
func (s *Server) log(r *http.Request, model string, body []byte) (Scripted, bool) {
	c := Call{ReceivedAt: s.now(), Model: model, IdempotencyKey: r.Header.Get("Idempotency-Key")}
	for _, h := range recordedHeaders {
		if v := strings.Join(r.Header.Values(h), ","); v != "" {
			if c.Headers == nil {
				c.Headers = map[string]string{}
			}
			c.Headers[h] = v
		}
	}
	if !s.noBodies && json.Valid(body) {
		c.Body = json.RawMessage(bytes.Clone(body))
	}
	return s.record(c)
}

// pause waits for sc's delay or hang. It reports false when the client left
// first; a handler released by Close cuts its connection, as a provider that
// dies mid-call would.
func (s *Server) pause(r *http.Request, sc Scripted) bool {
	if sc.DelayMS > 0 {
		t := time.NewTimer(time.Duration(sc.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return false
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	if sc.Hang {
		select {
		case <-r.Context().Done():
			return false
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	return true
}

// waitChunk waits ChunkDelayMS before a streamed chunk; false means the
// client left.
func (s *Server) waitChunk(r *http.Request, sc Scripted) bool {
	if sc.ChunkDelayMS <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(sc.ChunkDelayMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		panic(http.ErrAbortHandler)
	}
}

// scriptedHeaders sets sc's headers, sorted, so that keys differing only in
// case resolve the same way every time.
func scriptedHeaders(w http.ResponseWriter, sc Scripted) {
	keys := make([]string, 0, len(sc.Headers))
	for k := range sc.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.Header().Set(k, sc.Headers[k])
	}
}

// status is sc's status, 200 when unset.
func (sc Scripted) status() int {
	if sc.Status == 0 {
		return http.StatusOK
	}
	return sc.Status
}

// serveScripted answers with sc's body as is.
func (s *Server) serveScripted(w http.ResponseWriter, r *http.Request, sc Scripted) {
	if !s.pause(r, sc) {
		return
	}
	status := sc.status()
	if status < 200 || status > 599 {
		writeError(w, http.StatusInternalServerError, "fake: scripted status "+strconv.Itoa(sc.Status)+" is not 0 or 200-599")
		return
	}
	scriptedHeaders(w, sc)
	if sc.Body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, sc.Body)
}

// sse writes Server-Sent Events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter, sc Scripted) sse {
	scriptedHeaders(w, sc)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(sc.status())
	f, _ := w.(http.Flusher)
	return sse{w, f}
}

// send writes one event; event "" writes a data line only.
func (e sse) send(event string, v any) {
	b, _ := json.Marshal(v) // cannot fail: maps, strings, numbers and raw JSON that was validated
	if event != "" {
		_, _ = io.WriteString(e.w, "event: "+event+"\n")
	}
	_, _ = io.WriteString(e.w, "data: "+string(b)+"\n\n")
	e.flush()
}

func (e sse) done() {
	_, _ = io.WriteString(e.w, "data: [DONE]\n\n")
	e.flush()
}

func (e sse) flush() {
	if e.f != nil {
		e.f.Flush()
	}
}

// receiveOpenAI logs an OpenAI-format call and serves what its script
// says before any answer is planned: a scripted failure or raw answer, a
// pause, or a 400 for a body that did not decode (decodeErr). ok is false
// when the call has been answered.
func (s *Server) receiveOpenAI(w http.ResponseWriter, r *http.Request, body []byte, model string, stream bool, decodeErr error) (next Scripted, ok bool) {
	next, scripted := s.log(r, model, body)
	if scripted && !next.shapes(stream) {
		s.serveScripted(w, r, next)
		return next, false
	}
	if scripted && !s.pause(r, next) {
		return next, false
	}
	if decodeErr != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. (fake: "+decodeErr.Error()+")")
		return next, false
	}
	return next, true
}
