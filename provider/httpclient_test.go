package provider_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/provider/fake"
)

// TestHTTPClientKeepsConnections sends two waves of overlapping calls and
// counts the connections the provider saw opened: a client from
// NewHTTPClient(n) opens n for the first wave and reuses them all for the
// second, where a plain http.Client keeps two and dials the rest again.
func TestHTTPClientKeepsConnections(t *testing.T) {
	const calls = 16
	tests := []struct {
		name    string
		hc      *http.Client
		wantNew func(n int64) bool
		want    string
	}{
		{"NewHTTPClient", provider.NewHTTPClient(calls), func(n int64) bool { return n == calls }, "exactly 16"},
		{"plain http.Client", &http.Client{}, func(n int64) bool { return n > calls }, "more than 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fake.New()
			var (
				mu      sync.Mutex
				arrived int
				release = make(chan struct{})
				opened  atomic.Int64
			)
			// Each wave's calls wait in the handler until all of them
			// have arrived, so that every one holds its own connection.
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrived++
				if arrived == calls {
					arrived = 0
					close(release)
					release = make(chan struct{})
				} else {
					wait := release
					mu.Unlock()
					<-wait
					mu.Lock()
				}
				mu.Unlock()
				f.ServeHTTP(w, r)
			}))
			ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					opened.Add(1)
				}
			}
			ts.Start()
			t.Cleanup(ts.Close)
			t.Cleanup(f.Close)
			t.Cleanup(tt.hc.CloseIdleConnections)

			c := provider.NewOpenAI(ts.URL+"/v1", apiKey, tt.hc)
			for wave := range 2 {
				var wg sync.WaitGroup
				errs := make(chan error, calls)
				for range calls {
					wg.Go(func() {
						_, err := c.Complete(t.Context(), provider.Request{Chat: provider.Chat{Model: "gpt-4o-mini", Messages: []provider.Message{{Role: "user", Content: provider.Text("hello")}}}})
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatalf("wave %d: %v", wave, err)
					}
				}
			}
			if n := opened.Load(); !tt.wantNew(n) {
				t.Errorf("connections opened for 2 waves of %d calls = %d, want %s", calls, n, tt.want)
			}
		})
	}
}
