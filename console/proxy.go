package console

import (
	"net/http"
	"path"
	"strings"
)

const apiPrefix = "/console/api"

// forwardedHeaders are the only request headers passed to the API. The
// browser's cookies never reach it, and its Authorization is replaced by
// the session's key.
var forwardedHeaders = []string{"Accept", "Accept-Language", "X-Reason", "Traceparent", "If-None-Match"}

// proxy answers /console/api/{path} by calling the API in process with the
// session's key: /console/api/v1/usage?from=… is GET /v1/usage?from=… as
// the signed-in key. It forwards reads only (405 otherwise), /v1/... and,
// for admin sessions, /metrics (404 for anything else), and answers 401
// without a live session. An API 401 (the key was revoked since sign-in)
// ends the session too.
func (c *console) proxy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method_not_allowed", "The console is read-only: it forwards GET and HEAD only.")
		return
	}
	id, sess, ok := c.current(r)
	if !ok {
		c.clearCookie(w)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "Not signed in, or the session has expired.")
		return
	}
	target := strings.TrimPrefix(r.URL.Path, apiPrefix)
	// Escaped paths are refused rather than re-encoded: no API path needs
	// one (ids are UUIDs, owners are [A-Za-z0-9._-]), and refusing keeps
	// what is checked here the same as what the API routes.
	if r.URL.RawPath != "" || path.Clean(target) != target {
		writeProblem(w, http.StatusBadRequest, "invalid_request", "The path must be plain, without escapes or dot segments.")
		return
	}
	switch {
	case strings.HasPrefix(target, "/v1/"):
	case target == "/metrics":
		// The API serves /metrics to anyone; the console shows it on the
		// operators' page only.
		if sess.principal.Role != "admin" {
			writeProblem(w, http.StatusForbidden, "forbidden", "Metrics are shown to admin keys only.")
			return
		}
	default:
		writeProblem(w, http.StatusNotFound, "not_found", "The console forwards /v1/... and /metrics only.")
		return
	}

	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, nil)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid_request", "The path could not be read.")
		return
	}
	out.URL.RawQuery = r.URL.RawQuery
	out.RequestURI = out.URL.RequestURI()
	out.Host = r.Host
	out.RemoteAddr = r.RemoteAddr
	out.TLS = r.TLS
	for _, h := range forwardedHeaders {
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			out.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	out.Header.Set("Authorization", "Bearer "+sess.key)

	// Answers carry other owners' data: keep them out of every cache.
	w.Header().Set("Cache-Control", "no-store")
	sw := &statusWriter{ResponseWriter: w}
	c.api.ServeHTTP(sw, out)
	if sw.status == http.StatusUnauthorized {
		c.sessions.delete(id)
	}
}

// statusWriter records the status the API answered with. It passes Flush
// through so that streamed answers (usage.csv) stay streamed.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
