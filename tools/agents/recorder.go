package agents

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// Exchange is one request a client sent through the Recorder and the
// headers of the answer it got.
type Exchange struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Status       int
	Answer       http.Header
}

// Recorder is a reverse proxy in front of Tollgate that keeps what each
// client sent, so that it can be compared with what reached the upstream.
type Recorder struct {
	mu    sync.Mutex
	seen  []Exchange
	proxy *httputil.ReverseProxy
}

// NewRecorder proxies to target.
func NewRecorder(target *url.URL) *Recorder {
	r := &Recorder{}
	r.proxy = httputil.NewSingleHostReverseProxy(target)
	r.proxy.FlushInterval = -1
	r.proxy.ModifyResponse = func(resp *http.Response) error {
		i, ok := resp.Request.Context().Value(exchangeKey{}).(int)
		if !ok {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if i < len(r.seen) {
			r.seen[i].Status, r.seen[i].Answer = resp.StatusCode, resp.Header.Clone()
		}
		return nil
	}
	return r
}

func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.seen = append(r.seen, Exchange{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
	i := len(r.seen) - 1
	r.mu.Unlock()
	r.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), exchangeKey{}, i)))
}

// exchangeKey carries an exchange's index to the answer's hook, so that
// concurrent calls on one path are told apart.
type exchangeKey struct{}

// ModelCalls are the POSTs to model endpoints, oldest first.
func (r *Recorder) ModelCalls() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Exchange
	for _, e := range r.seen {
		if e.Method == http.MethodPost && isModelPath(e.Path) {
			out = append(out, e)
		}
	}
	return out
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = nil
}

func isModelPath(p string) bool {
	for _, s := range []string{"/chat/completions", "/responses", "/messages"} {
		if strings.HasSuffix(strings.TrimSuffix(p, "/"), s) {
			return true
		}
	}
	return false
}
