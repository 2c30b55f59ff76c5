package provider

import (
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"
)

// FuzzUsageFigures puts any two strings where an answer's usage figures
// go, in the OpenAI and the Anthropic format, and checks what settlement
// relies on: an answer is never refused over its usage while both are
// JSON numbers, however large, small, negative or fractional; each figure
// is the number truncated towards zero and saturated at the int64 bounds
// (Anthropic's prompt parts, each so read, summed saturating, never
// wrapping); and
// anything else either parses the same way or is a classified error,
// never a panic.
func FuzzUsageFigures(f *testing.F) {
	for _, seed := range [][2]string{
		{"6", "16"}, {"0", "0"}, {"-5", "1"}, {"1e30", "100000000000000000000000"},
		{"9223372036854775807", "9223372036854775807"}, {"9223372036854775808", "-9223372036854775809"},
		{"1.9", "-1.9"}, {"1e999999999999", "1e-999999999999"}, {"null", "2"}, {`"3"`, "true"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		numbers := isJSONNumber(a) && isJSONNumber(b)
		body := `{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":` + a + `,"completion_tokens":` + b + `}}`
		r, err := parseCompletion(200, nil, []byte(body))
		checkUsage(t, "openai", body, numbers, r, err, want(a), want(b))
		body = `{"type":"message","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",` +
			`"usage":{"input_tokens":` + a + `,"cache_read_input_tokens":` + b + `,"output_tokens":` + b + `}}`
		r, err = parseMessage(200, nil, []byte(body))
		checkUsage(t, "anthropic", body, numbers, r, err, clamp(new(big.Int).Add(big.NewInt(want(a)), big.NewInt(want(b)))), want(b))
	})
}

func checkUsage(t *testing.T, format, body string, numbers bool, r *Response, err error, wantIn, wantOut int64) {
	t.Helper()
	if err != nil {
		if numbers && json.Valid([]byte(body)) {
			t.Fatalf("%s: an answer with numeric usage refused: %v\nbody: %s", format, err, body)
		}
		if _, ok := err.(*Error); !ok {
			t.Fatalf("%s: error %T is not a *Error", format, err)
		}
		return
	}
	if !numbers {
		return // null and the like read as zero; nothing more to say
	}
	if r.Usage == nil || r.Usage.InputTokens != wantIn || r.Usage.OutputTokens != wantOut {
		t.Fatalf("%s: usage %+v, want %d and %d\nbody: %s", format, r.Usage, wantIn, wantOut, body)
	}
}

// isJSONNumber reports whether s is exactly one JSON number.
func isJSONNumber(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && json.Valid([]byte(s))
}

// truncated is s, a JSON number, truncated towards zero; exponents beyond
// what big.Float reads stand for an infinite magnitude (or zero).
func truncated(s string) *big.Int {
	s = strings.TrimSpace(s)
	if !isJSONNumber(s) {
		return new(big.Int)
	}
	f, _, err := big.ParseFloat(s, 10, 64, big.ToZero)
	if err != nil {
		switch {
		case strings.Contains(strings.ToLower(s), "e-"):
			return new(big.Int)
		case s[0] == '-':
			return big.NewInt(math.MinInt64)
		}
		return big.NewInt(math.MaxInt64)
	}
	if f.IsInf() {
		if f.Sign() < 0 {
			return big.NewInt(math.MinInt64)
		}
		return big.NewInt(math.MaxInt64)
	}
	i, _ := f.Int(nil)
	return i
}

func want(s string) int64 { return clamp(truncated(s)) }

func clamp(i *big.Int) int64 {
	switch {
	case i.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case i.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return i.Int64()
}
