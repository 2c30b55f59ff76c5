package tasks

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/seal"
)

// Zero settings take their defaults; a negative one keeps its meaning
// where it has one (no bound, no repeat, never shed on the queue) and
// takes the default where it has none.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	sealer, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	type settings struct {
		RequestTimeout, ShedQueueWait, RetryBase    time.Duration
		MaxAttempts, AmbiguousRetries, MaxAdmitting int
	}
	cases := []struct {
		name string
		in   settings
		want settings
	}{
		{"zero", settings{}, settings{30 * time.Second, time.Minute, time.Second, 4, 1, 64}},
		{"negative", settings{-1, -1, -1, -1, -1, -1}, settings{30 * time.Second, -1, time.Second, 4, -1, -1}},
		{"set", settings{time.Second, time.Second, 2 * time.Second, 2, 3, 8}, settings{time.Second, time.Second, 2 * time.Second, 2, 3, 8}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Catalog: &catalog.Catalog{}, Sealer: sealer, RequestTimeout: c.in.RequestTimeout, ShedQueueWait: c.in.ShedQueueWait,
				RetryBase: c.in.RetryBase, MaxAttempts: c.in.MaxAttempts, AmbiguousRetries: c.in.AmbiguousRetries, MaxAdmitting: c.in.MaxAdmitting}
			if err := cfg.defaults(); err != nil {
				t.Fatal(err)
			}
			got := settings{cfg.RequestTimeout, cfg.ShedQueueWait, cfg.RetryBase, cfg.MaxAttempts, cfg.AmbiguousRetries, cfg.MaxAdmitting}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if cfg.Logger == nil || cfg.Now == nil || cfg.Redactor == nil || cfg.AlertThresholds == nil {
				t.Error("logger, clock, redactor or alert thresholds left nil")
			}
		})
	}
}

// What the service cannot run without is an error, as is a rescue that
// could retry a job still within its timeout.
func TestConfigRequires(t *testing.T) {
	t.Parallel()
	sealer, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cat := &catalog.Catalog{Providers: []catalog.Provider{{Key: "p"}}}
	cases := []struct {
		name string
		cfg  Config
		want string // in the error
	}{
		{"no catalog", Config{Sealer: sealer}, "Catalog is required"},
		{"no client for a provider key", Config{Catalog: cat, Sealer: sealer}, `no client for provider key "p"`},
		{"no sealer", Config{Catalog: &catalog.Catalog{}}, "Sealer is required"},
		{"rescue within the job timeout", Config{Catalog: &catalog.Catalog{}, Sealer: sealer, RescueAfter: time.Second}, "RescueAfter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.defaults()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}
