package server

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/tasks"
)

func TestFormatUnits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		micros int64
		want   string
	}{
		{0, "0"}, {1, "0.000001"}, {1500, "0.0015"}, {1_000_000, "1"}, {1_500_000, "1.5"},
		{-2_050_000, "-2.05"}, {9223372036854775807, "9223372036854.775807"}, {-9223372036854775808, "-9223372036854.775808"},
	}
	for _, c := range cases {
		if got := formatUnits(c.micros); got != c.want {
			t.Errorf("formatUnits(%d) = %q, want %q", c.micros, got, c.want)
		}
	}
}

// RFC 7240: a wait Tollgate cannot honour is ignored, the first valid one
// counts, a huge one is capped.
func TestPreferWaitIgnoresWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	const max = 60 * time.Second
	cases := []struct {
		header string
		wait   time.Duration
		set    bool
	}{
		{"", 0, false},
		{"wait=abc", 0, false},
		{"wait=-1", 0, false},
		{"wait=", 0, false},
		{"respond-async", 0, false},
		{"wait=5", 5 * time.Second, true},
		{`wait="7"`, 7 * time.Second, true},
		{"wait=abc, wait=3", 3 * time.Second, true},
		{"respond-async; WAIT=2", 2 * time.Second, true},
		{"wait=0", 0, true},
		{"wait=99999999999999999999999", max, true},
		{"wait=3600", max, true},
	}
	for _, c := range cases {
		wait, set := preferWait(c.header, max)
		if wait != c.wait || set != c.set {
			t.Errorf("preferWait(%q) = %v, %v; want %v, %v", c.header, wait, set, c.wait, c.set)
		}
	}
}

// The OpenAI message of a request refused for its fields names the first
// field and its reason.
func TestFieldsMessage(t *testing.T) {
	t.Parallel()
	one := []tasks.FieldError{{Field: "temperature", Message: "must be between 0 and 2"}}
	three := append(one, tasks.FieldError{Field: "top_p", Message: "x"}, tasks.FieldError{Field: "n", Message: "y"})
	cases := []struct {
		detail string
		fields []tasks.FieldError
		want   string
	}{
		{validationDetail, one, "Invalid 'temperature': must be between 0 and 2."},
		{validationDetail, three, "Invalid 'temperature': must be between 0 and 2. 2 more fields are invalid."},
		{validationDetail, one[:1:1], "Invalid 'temperature': must be between 0 and 2."},
		{`Unknown field "temperature".`, one, `Unknown field "temperature".`},
		{"The model refused.", one, "The model refused. Invalid 'temperature': must be between 0 and 2."},
	}
	for _, c := range cases {
		if got := fieldsMessage(c.detail, c.fields); got != c.want {
			t.Errorf("fieldsMessage(%q, %v) = %q, want %q", c.detail, c.fields, got, c.want)
		}
	}
}
