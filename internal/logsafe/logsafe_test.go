package logsafe_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/logsafe"
)

// secrets appear in the inputs below and must appear in no output.
var secrets = []string{"s3cret", "hunter2", "tok123", "sig456", "frag789", "pa ss"}

func TestURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable", "postgres://127.0.0.1:5432/tollgate?sslmode=REDACTED"},
		{"postgres://app:s3cret@db:5432/tollgate", "postgres://db:5432/tollgate"},
		{"postgres://app@db/tollgate?password=hunter2&sslmode=require", "postgres://db/tollgate?password=REDACTED&sslmode=REDACTED"},
		{"https://user:tok123@llm.example.com/v1?api-key=sig456#frag789", "https://llm.example.com/v1?api-key=REDACTED#REDACTED"},
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"host=db user=app password=s3cret dbname=tollgate", "host=db user=app password=REDACTED dbname=tollgate"},
		{"host=db password='pa ss' sslpassword = hunter2", "host=db password=REDACTED sslpassword = REDACTED"},
		{"postgres://app:s3cret@db/x%zz", "postgres://db/REDACTED"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
	}
	for _, tt := range tests {
		got := logsafe.URL(tt.in)
		if got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		noSecret(t, got)
	}
}

func TestOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://hooks.example.com/services/T0/B0/s3cret": "https://hooks.example.com",
		"https://u:hunter2@hooks.example.com/x?k=tok123":  "https://hooks.example.com",
		"::not a url s3cret":                              "REDACTED",
	} {
		if got := logsafe.Origin(in); got != want {
			t.Errorf("Origin(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestError covers the errors Go itself builds around a URL: *url.Error
// from a client call, a url.Parse failure, and both wrapped.
func TestError(t *testing.T) {
	t.Parallel()
	bad := fmt.Sprintf("postgres://app:%s@db/x%%zz", "s3cret") // an invalid escape
	_, parseErr := url.Parse(bad)
	req, _ := http.NewRequest(http.MethodPost, "http://u:hunter2@127.0.0.1:1/hook?token=tok123", nil)
	_, doErr := (&http.Client{}).Do(req)
	for _, err := range []error{
		parseErr,
		fmt.Errorf("migrations: parse DATABASE_URL: %w", parseErr),
		doErr,
		fmt.Errorf("webhook: %w", doErr),
		errors.New(`tracing: OTLP endpoint "https://collector/v1/traces?key=sig456" is not valid`),
		errors.New("connect host=db password=s3cret failed"),
	} {
		if err == nil {
			t.Fatal("the test's error was not built")
		}
		got := logsafe.Error(err)
		noSecret(t, got)
		if !strings.Contains(got, logsafe.Redacted) && !strings.Contains(got, "://") {
			t.Errorf("Error(%q) = %q: lost the URL entirely", err, got)
		}
	}
	if logsafe.Error(nil) != "" {
		t.Error("Error(nil) is not empty")
	}
}

func noSecret(t *testing.T, s string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Errorf("%q still holds %q", s, sec)
		}
	}
}

func TestErrorKeepsOnlyTheOrigin(t *testing.T) {
	t.Parallel()
	err := &url.Error{Op: "Post", URL: "https://hooks.example.com/services/T0/B0/s3cret", Err: errors.New("EOF")}
	if got, want := logsafe.Error(err), `Post "https://hooks.example.com/REDACTED": EOF`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}
