package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

// newClient returns a kind client, built by New, for a server whose fake
// endpoints hang off root.
func newClient(t *testing.T, kind, root string, hc *http.Client) provider.Client {
	t.Helper()
	base := root
	if kind == provider.KindOpenAI {
		base += "/v1"
	}
	c, err := provider.New(kind, provider.Options{BaseURL: base, APIKey: apiKey, AccountID: "acc-1", HTTPClient: hc})
	if err != nil {
		t.Fatalf("New(%q): %v", kind, err)
	}
	return c
}

// startFakeKind serves a fake provider and returns it with a kind client
// pointed at it.
func startFakeKind(t *testing.T, kind string) (*fake.Server, provider.Client) {
	t.Helper()
	f := fake.New()
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	t.Cleanup(f.Close) // runs first, so hanging handlers do not block ts.Close
	return f, newClient(t, kind, ts.URL, ts.Client())
}

// scriptedCase is one canned provider answer and what Complete makes of it.
type scriptedCase struct {
	name    string
	script  fake.Scripted
	want    *provider.Response
	wantErr *provider.Error
	wantRaw bool // the error carries the provider's message
}

// runScripted sends req once per case to a fresh fake scripted with the
// case's answer, through a kind client.
func runScripted(t *testing.T, kind string, req provider.Request, tests []scriptedCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := startFakeKind(t, kind)
			f.Script(tt.script)
			got, err := c.Complete(t.Context(), req)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Complete mismatch (-want +got):\n%s", diff)
				}
			} else {
				if got != nil {
					t.Errorf("Complete returned %+v with an error, want nil", got)
				}
				pe := asError(t, err)
				if diff := cmp.Diff(tt.wantErr, pe, ignoreRaw); diff != "" {
					t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
				}
				if gotRaw := pe.RawMessage() != ""; gotRaw != tt.wantRaw {
					t.Errorf("RawMessage() = %q, want present: %v", pe.RawMessage(), tt.wantRaw)
				}
			}
			calls := f.Calls()
			if len(calls) != 1 || calls[0].IdempotencyKey != req.IdempotencyKey {
				t.Errorf("call log = %+v, want one call with Idempotency-Key %s", calls, req.IdempotencyKey)
			}
		})
	}
}

// TestCompleteNetworkFailures checks that every adapter draws the line
// between "nothing was sent" (transient) and "the provider may have it"
// (ambiguous) in the same place.
func TestCompleteNetworkFailures(t *testing.T) {
	t.Parallel()
	req := provider.Request{Chat: provider.Chat{Model: "gpt-test", Messages: []provider.Message{{Role: "user", Content: provider.Text("hi")}}, MaxTokens: 16}, IdempotencyKey: "task-9:1"}
	for _, kind := range provider.Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testNetworkFailures(t, kind, req)
		})
	}
}

func testNetworkFailures(t *testing.T, kind string, req provider.Request) {
	t.Run("deadline while the provider hangs after reading the request", func(t *testing.T) {
		t.Parallel()
		f, c := startFakeKind(t, kind)
		f.Script(fake.Scripted{Hang: true})
		// The deadline only has to outlast writing a tiny request to a
		// local server; the fake never answers.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := c.Complete(ctx, req)
		pe := asError(t, err)
		want := &provider.Error{Class: provider.ClassAmbiguous, Code: "timeout"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false, want true", err)
		}
		if pe.Unclassified() {
			t.Error("Unclassified() = true, want false for a network failure")
		}
		if calls := f.Calls(); len(calls) != 1 || calls[0].IdempotencyKey != "task-9:1" || calls[0].Model != "gpt-test" {
			t.Errorf("call log = %+v, want one call for gpt-test with key task-9:1", calls)
		}
	})

	t.Run("canceled once the provider has the request", func(t *testing.T) {
		t.Parallel()
		f, c := startFakeKind(t, kind)
		f.Script(fake.Scripted{Hang: true})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := c.Complete(ctx, req)
			errc <- err
		}()
		waitFor(t, "the fake to log the call", func() bool { return f.CallCount() == 1 })
		cancel()
		pe := asError(t, <-errc)
		want := &provider.Error{Class: provider.ClassAmbiguous, Code: "canceled"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
		if !errors.Is(pe, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = false, want true", pe)
		}
	})

	t.Run("connection cut after the provider has the request", func(t *testing.T) {
		t.Parallel()
		f, c := startFakeKind(t, kind)
		f.Script(fake.Scripted{Hang: true})
		errc := make(chan error, 1)
		go func() {
			_, err := c.Complete(t.Context(), req)
			errc <- err
		}()
		waitFor(t, "the fake to log the call", func() bool { return f.CallCount() == 1 })
		f.Close()
		pe := asError(t, <-errc)
		want := &provider.Error{Class: provider.ClassAmbiguous, Code: "connection_cut"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		_, err := newClient(t, kind, url, nil).Complete(t.Context(), req)
		pe := asError(t, err)
		want := &provider.Error{Class: provider.ClassTransient, Code: "connection_error"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("canceled before sending", func(t *testing.T) {
		t.Parallel()
		f, c := startFakeKind(t, kind)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.Complete(ctx, req)
		pe := asError(t, err)
		want := &provider.Error{Class: provider.ClassTransient, Code: "canceled"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
		if n := f.CallCount(); n != 0 {
			t.Errorf("CallCount() = %d, want 0", n)
		}
	})

	t.Run("success cut off mid-body", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"id":"x","choices":[{"message":{"content":"hel`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}))
		t.Cleanup(ts.Close)
		_, err := newClient(t, kind, ts.URL, ts.Client()).Complete(t.Context(), req)
		pe := asError(t, err)
		want := &provider.Error{Class: provider.ClassAmbiguous, Status: 200, Code: "connection_cut"}
		if diff := cmp.Diff(want, pe, ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("failure cut off mid-body is classified on what arrived", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `upstream busy`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}))
		t.Cleanup(ts.Close)
		_, err := newClient(t, kind, ts.URL, ts.Client()).Complete(t.Context(), req)
		want := &provider.Error{Class: provider.ClassTransient, Status: 503, Code: "service_unavailable"}
		if diff := cmp.Diff(want, asError(t, err), ignoreRaw); diff != "" {
			t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestCompleteBoundsTheBody(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat(" ", 5<<20)
	tests := []struct {
		name   string
		status int
		body   string
		want   *provider.Error
	}{
		{"huge success", 200, `{"choices":[{"message":{"content":"hi"}}]}` + huge, &provider.Error{Class: provider.ClassTransient, Status: 200, Code: "malformed_response"}},
		{"huge failure", 503, huge, &provider.Error{Class: provider.ClassTransient, Status: 503, Code: "service_unavailable"}},
	}
	for _, kind := range provider.Kinds() {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f, c := startFakeKind(t, kind)
				f.Script(fake.Scripted{Status: tt.status, Body: tt.body})
				_, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "m", MaxTokens: 1}})
				if diff := cmp.Diff(tt.want, asError(t, err), ignoreRaw); diff != "" {
					t.Errorf("Complete error mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}
