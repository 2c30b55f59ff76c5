package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cpuProfile fetches a CPU profile of the server over d from its pprof
// listener (TOLLGATE_PPROF_ADDR; pprofURL is its root, http://host:port)
// and writes it to path, creating the directory. Read it with
// `go tool pprof -top bin/tollgate path`. A profile costs the server a few
// percent of its CPU while it runs.
func cpuProfile(ctx context.Context, pprofURL string, d time.Duration, path string) error {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimRight(pprofURL, "/"), secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	client := &http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: profile: %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("bench: profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	return nil
}
