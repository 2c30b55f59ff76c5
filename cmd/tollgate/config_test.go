package main

import (
	"testing"
	"time"
)

// The shedding bounds: defaults, zero for none (passed to tasks.Config as
// -1, since zero there takes the default), and out-of-range values refused.
func TestSheddingSettings(t *testing.T) {
	cases := []struct {
		name          string
		env           map[string]string
		wantAdmitting int
		wantWait      time.Duration
		wantErr       bool
	}{
		{"defaults", nil, 64, time.Minute, false},
		{"set", map[string]string{"TOLLGATE_MAX_ADMITTING": "64", "TOLLGATE_SHED_QUEUE_WAIT_S": "5"}, 64, 5 * time.Second, false},
		{"zero is none", map[string]string{"TOLLGATE_MAX_ADMITTING": "0", "TOLLGATE_SHED_QUEUE_WAIT_S": "0"}, -1, -1, false},
		{"negative admitting", map[string]string{"TOLLGATE_MAX_ADMITTING": "-1"}, 0, 0, true},
		{"not a number", map[string]string{"TOLLGATE_SHED_QUEUE_WAIT_S": "1m"}, 0, 0, true},
		{"admission wait zero", map[string]string{"TOLLGATE_MAX_ADMISSION_WAIT_MS": "0"}, 0, 0, true},
		{"too long", map[string]string{"TOLLGATE_SHED_QUEUE_WAIT_S": "86401"}, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return c.env[k] })
			if (err != nil) != c.wantErr {
				t.Fatalf("loadConfig: err = %v, want error %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if got := orNone(cfg.MaxAdmitting); got != c.wantAdmitting {
				t.Errorf("MaxAdmitting = %d, want %d", got, c.wantAdmitting)
			}
			if got := orNone(cfg.ShedQueueWait); got != c.wantWait {
				t.Errorf("ShedQueueWait = %s, want %s", got, c.wantWait)
			}
		})
	}
}
