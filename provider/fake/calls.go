package fake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// message is one chat message in the form every endpoint reduces to.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// readRequest reads a model call's body into v, which must be a JSON object.
// The error only decides the answer once the call is logged.
func readRequest(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		return err
	}
	return decodeObject(body, v)
}

func decodeObject(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return errors.New("request body is not a JSON object")
	}
	return json.Unmarshal(body, v)
}

// take logs a model call on any endpoint and, when a scripted response is
// queued, serves it and reports true. Logging comes before choosing the
// answer, so that tests see every call, including ones that fail.
func (s *Server) take(w http.ResponseWriter, r *http.Request, model string) bool {
	next, scripted := s.record(Call{
		ReceivedAt:     s.now(),
		Model:          model,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	if scripted {
		s.serveScripted(w, r, next)
	}
	return scripted
}

// serveScripted answers with sc. A handler released by Close cuts its
// connection, as a provider that dies mid-call would.
func (s *Server) serveScripted(w http.ResponseWriter, r *http.Request, sc Scripted) {
	if sc.DelayMS > 0 {
		t := time.NewTimer(time.Duration(sc.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	if sc.Hang {
		select {
		case <-r.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}
	status := sc.Status
	if status == 0 {
		status = http.StatusOK
	}
	if status < 200 || status > 599 {
		writeError(w, http.StatusInternalServerError, "fake: scripted status "+strconv.Itoa(sc.Status)+" is not 0 or 200-599")
		return
	}
	// Sorted, so that keys differing only in case resolve the same way
	// every time.
	keys := make([]string, 0, len(sc.Headers))
	for k := range sc.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.Header().Set(k, sc.Headers[k])
	}
	if sc.Body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, sc.Body)
}

// answer is the deterministic completion described in the package
// documentation, the same for the same conversation on every endpoint.
type answer struct {
	digest      string // hex SHA-256 of the messages as [{"role","content"}...]
	text        string
	prompt, out int
}

// answerFor answers msgs with at most limit tokens; limit <= 0 means 16.
func answerFor(msgs []message, limit int) answer {
	if msgs == nil {
		msgs = []message{}
	}
	canonical, _ := json.Marshal(msgs) // cannot fail: strings only
	sum := sha256.Sum256(canonical)
	digest := hex.EncodeToString(sum[:])

	prompt := 0
	for _, m := range msgs {
		prompt += (len(m.Content)+3)/4 + 4
	}
	if limit <= 0 {
		limit = 16
	}
	return answer{digest: digest, text: "fake completion " + digest[:12], prompt: prompt, out: min(limit, 16)}
}
