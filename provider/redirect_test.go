package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

type streamer interface {
	Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error)
}

// TestCallsNeverFollowRedirects points every adapter at a server that
// answers each call with a redirect to a second server, the fake provider,
// which would answer it: the second server must receive nothing (neither
// the prompt nor the credential), and the call fails classified as
// exhausted/redirect_refused, whatever http.Client the caller passed in.
func TestCallsNeverFollowRedirects(t *testing.T) {
	t.Parallel()
	clients := map[string]func() *http.Client{
		"nil client":    func() *http.Client { return nil },
		"plain client":  func() *http.Client { return &http.Client{} },
		"NewHTTPClient": func() *http.Client { return provider.NewHTTPClient(4) },
	}
	for _, kind := range provider.Kinds() {
		for _, status := range []int{301, 302, 303, 307, 308} {
			for name, hc := range clients {
				for _, stream := range []bool{false, true} {
					t.Run(kind+"/"+strconv.Itoa(status)+"/"+name+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
						t.Parallel()
						f := fake.New()
						var reached atomic.Int64
						elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							reached.Add(1)
							f.ServeHTTP(w, r)
						}))
						t.Cleanup(elsewhere.Close)
						t.Cleanup(f.Close)
						redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							// Read the body first: a server that answers before
							// reading it may reset the connection under the
							// client's write, and the call would read as cut.
							_, _ = io.Copy(io.Discard, r.Body)
							// Keep no connection: with a nil client the calls
							// share http.DefaultTransport, and a connection kept
							// to a closed subtest's server whose port a later
							// one reuses would fail its POST as cut.
							w.Header().Set("Connection", "close")
							http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), status)
						}))
						t.Cleanup(redirector.Close)

						c := newClient(t, kind, redirector.URL, hc())
						req := provider.Request{Chat: provider.Chat{Model: "gpt-4o-mini", MaxTokens: 16, Messages: []provider.Message{{Role: "user", Content: provider.Text("secret prompt")}}}}
						var err error
						if s, ok := c.(streamer); ok && stream {
							_, err = s.Stream(t.Context(), req, func(provider.Delta) {})
						} else if stream {
							t.Skip(kind + " has no Stream")
						} else {
							_, err = c.Complete(t.Context(), req)
						}
						var pe *provider.Error
						if !errors.As(err, &pe) {
							t.Fatalf("call through a %d = %v, want a *provider.Error", status, err)
						}
						if pe.Class != provider.ClassExhausted || pe.Code != provider.CodeRedirectRefused || pe.Status != status {
							t.Errorf("call through a %d = %s/%s (status %d), want exhausted/%s (status %d)",
								status, pe.Class, pe.Code, pe.Status, provider.CodeRedirectRefused, status)
						}
						if n := reached.Load(); n != 0 {
							t.Errorf("the redirect's target received %d requests, want 0", n)
						}
					})
				}
			}
		}
	}
}
