package provider

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"
)

// codeFormat is what Error.Code may look like: a short machine token,
// never free text from the provider.
var codeFormat = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// FuzzClassify runs Classify on any status, headers and body, for every
// wire format and for an unknown one, and checks what callers rely on: an
// unknown kind is an error; a known kind always gets a *Error whose class is
// one of the five, whose status is the one given, whose code is a short
// token, whose param is a path of request field names on a rejection,
// whose Retry-After lies in [0, 24h], whose Error() text carries
// nothing but class, code and status, and whose raw message is valid UTF-8
// and clipped. The same input classifies the same way twice.
func FuzzClassify(f *testing.F) {
	// Every real provider error the classifier tests use is a seed.
	if raw, err := os.ReadFile("testdata/provider-errors.json"); err == nil {
		var cases []struct {
			Family  string            `json:"family"`
			Status  int               `json:"status"`
			Headers map[string]string `json:"headers"`
			Body    string            `json:"body"`
		}
		if err := json.Unmarshal(raw, &cases); err != nil {
			f.Fatal(err)
		}
		for _, c := range cases {
			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			f.Add(kindIndex(c.Family), c.Status, h.Get("Retry-After"), h.Get("retry-after-ms"), []byte(c.Body))
		}
	}
	f.Add(uint8(0), 429, "Wed, 21 Oct 2015 07:28:00 GMT", "", []byte(`{"error":{"message":"Please try again in 1.5s"}}`))
	f.Add(uint8(1), 529, "1e400", "NaN", []byte(`[{"error":{"type":"overloaded_error"}}]`))
	f.Add(uint8(2), 400, "-5", "99999999999999999999", []byte(`{"errors":[{"code":3036,"message":"4006: daily free allocation"}]}`))
	f.Add(uint8(3), 200, "", "", []byte("\xff\xfe not json"))
	f.Add(uint8(0), 400, "", "", []byte(`{"error":{"type":"invalid_request_error","param":"tools[0].function.parameters.properties.x","code":"invalid_value"}}`))
	kinds := append(Kinds(), "no-such-kind")
	f.Fuzz(func(t *testing.T, kind uint8, status int, retryAfter, retryAfterMS string, body []byte) {
		k := kinds[int(kind)%len(kinds)]
		status = 100 + abs(status)%900 // an HTTP status is three digits
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		if retryAfterMS != "" {
			h.Set("retry-after-ms", retryAfterMS)
		}
		e, err := Classify(k, status, h, body)
		if k == "no-such-kind" {
			if err == nil || e != nil {
				t.Fatalf("Classify(%q) = %v, %v; want an error", k, e, err)
			}
			return
		}
		if err != nil || e == nil {
			t.Fatalf("Classify(%q, %d) = %v, %v; want a *Error", k, status, e, err)
		}
		switch e.Class {
		case ClassTransient, ClassThrottled, ClassExhausted, ClassRejected, ClassAmbiguous:
		default:
			t.Fatalf("class %q is not one of the five", e.Class)
		}
		if e.Status != status {
			t.Fatalf("status %d, want %d", e.Status, status)
		}
		if !codeFormat.MatchString(e.Code) {
			t.Fatalf("code %q is not a short machine token (body %q)", e.Code, body)
		}
		if e.RetryAfter < 0 || e.RetryAfter > maxRetryAfter {
			t.Fatalf("RetryAfter %s outside [0, %s] (Retry-After %q, retry-after-ms %q)", e.RetryAfter, maxRetryAfter, retryAfter, retryAfterMS)
		}
		if want := "provider: " + string(e.Class) + ": " + e.Code + " (status " + strconv.Itoa(status) + ")"; e.Error() != want {
			t.Fatalf("Error() = %q, want %q: it must carry nothing from the body", e.Error(), want)
		}
		if msg := e.RawMessage(); !utf8.ValidString(msg) || len(msg) > maxRawMessage {
			t.Fatalf("raw message of %d bytes, valid UTF-8 %v; want at most %d valid bytes", len(msg), utf8.ValidString(msg), maxRawMessage)
		}
		if e.Param != "" && (e.Class != ClassRejected || len(e.Param) > maxParam || requestParam(e.Param) != e.Param) {
			t.Fatalf("param %q on a %s failure: want only a path of request field names on a rejection", e.Param, e.Class)
		}
		again, _ := Classify(k, status, h, body)
		if again.Class != e.Class || again.Code != e.Code || again.Unclassified() != e.Unclassified() {
			t.Fatalf("not deterministic: %v then %v", e, again)
		}
	})
}

// kindIndex maps a test-data family to its index in Kinds().
func kindIndex(family string) uint8 {
	for i, k := range Kinds() {
		if k == family {
			return uint8(i)
		}
	}
	return 0
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}
