package provider

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		msg    string
		want   time.Duration
	}{
		{"nothing", nil, "slow down", 0},
		{"seconds", map[string]string{"Retry-After": "7"}, "", 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, "", 500 * time.Millisecond},
		{"negative seconds", map[string]string{"Retry-After": "-3"}, "", 0},
		{"garbage header falls through to the hint", map[string]string{"Retry-After": "soon"}, "Please try again in 2s.", 2 * time.Second},
		{"garbage ms header falls through", map[string]string{"retry-after-ms": "x", "Retry-After": "4"}, "", 4 * time.Second},
		{"ms header", map[string]string{"retry-after-ms": "250"}, "try again in 9s", 250 * time.Millisecond},
		{"header beats hint", map[string]string{"Retry-After": "1"}, "try again in 9s", time.Second},
		{"ms hint", nil, "Please try again in 174ms. Visit ...", 174 * time.Millisecond},
		{"compound hint", nil, "Please try again in 1m30s.", 90 * time.Second},
		{"word hint", nil, "Please retry after 20 seconds.", 20 * time.Second},
		{"minute hint", nil, "Try again in 1 minute", time.Minute},
		{"millisecond words", nil, "retry in 300 milliseconds", 300 * time.Millisecond},
		{"no number", nil, "please try again later", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := retryAfter(h, tt.msg, func() time.Time { return now }); got != tt.want {
				t.Errorf("retryAfter(%v, %q) = %v, want %v", tt.header, tt.msg, got, tt.want)
			}
		})
	}
}
