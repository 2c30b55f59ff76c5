package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCPUProfile(t *testing.T) {
	t.Parallel()
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		gotQuery = r.URL.RawQuery
		_, _ = w.Write([]byte("profile bytes"))
	}))
	defer srv.Close()

	path := filepath.Join(t.TempDir(), "sub", "cpu.pprof")
	if err := cpuProfile(context.Background(), srv.URL+"/", 1400*time.Millisecond, path); err != nil {
		t.Fatalf("cpuProfile = %v, want no error", err)
	}
	if gotQuery != "seconds=1" {
		t.Errorf("cpuProfile asked %q, want seconds=1", gotQuery)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "profile bytes" {
		t.Errorf("profile file = %q, %v; want the served bytes", b, err)
	}

	err := cpuProfile(context.Background(), srv.URL+"/nothing", time.Second, filepath.Join(t.TempDir(), "x.pprof"))
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("cpuProfile of a missing listener = %v, want a 404 error", err)
	}
}
