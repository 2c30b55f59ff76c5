package provider

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps what a provider can ask for, so that a garbled header
// cannot park a task for years.
const maxRetryAfter = 24 * time.Hour

var (
	// "Please try again in 174ms", "in 6m0s", "Please retry in 38.17s".
	hintGoDuration = regexp.MustCompile(`(?i)\b(?:try again|retry)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)\b`)
	// "Please retry after 20 seconds", "try again in 1 minute".
	hintWords = regexp.MustCompile(`(?i)\b(?:try again|retry)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(milliseconds?|seconds?|secs?|minutes?|mins?|hours?)\b`)
)

// retryAfter reads, in order of precision, the retry-after-ms header, the
// Retry-After header (seconds or an HTTP date) and a hint in the message. It
// returns 0 when none says anything usable.
func retryAfter(h http.Header, msg string, now func() time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return bound(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			return bound(secs * float64(time.Second))
		}
		if at, err := http.ParseTime(v); err == nil {
			// Measure against the server's own clock when it sent one, so
			// that clock skew between us and the provider does not matter.
			ref := now()
			if d, err := http.ParseTime(h.Get("Date")); err == nil {
				ref = d
			}
			return bound(float64(at.Sub(ref)))
		}
	}
	if m := hintGoDuration.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(strings.ToLower(m[1])); err == nil {
			return bound(float64(d))
		}
	}
	if m := hintWords.FindStringSubmatch(msg); m != nil {
		n, err := strconv.ParseFloat(m[1], 64)
		if err == nil {
			unit := time.Second
			switch u := strings.ToLower(m[2]); {
			case strings.HasPrefix(u, "milli"):
				unit = time.Millisecond
			case strings.HasPrefix(u, "min"):
				unit = time.Minute
			case strings.HasPrefix(u, "hour"):
				unit = time.Hour
			}
			return bound(n * float64(unit))
		}
	}
	return 0
}

// bound turns a duration in nanoseconds into one in [0, maxRetryAfter].
func bound(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= float64(maxRetryAfter):
		return maxRetryAfter
	}
	return time.Duration(ns)
}
