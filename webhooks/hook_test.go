package webhooks

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestHookSend: an operator's hook takes the webhooks' attempt: the same
// headers (no signature: it has no secret), one webhook-id for every try,
// tried again after a failure as its Retry says and no more; the address
// policy of an admin's URL (loopback yes, cloud metadata never).
func TestHookSend(t *testing.T) {
	t.Parallel()
	type try struct {
		id          string
		signed      bool
		contentType string
		body        string
	}
	var mu sync.Mutex
	var tries []try
	statuses := map[string][]int{"/flaky": {500, 200}, "/down": {503, 503, 503, 503}}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		_, signed := r.Header["Webhook-Signature"]
		tries = append(tries, try{r.Header.Get("webhook-id"), signed, r.Header.Get("content-type"), string(b)})
		w.WriteHeader(statuses[r.URL.Path][0])
		statuses[r.URL.Path] = statuses[r.URL.Path][1:]
	}))
	t.Cleanup(rcv.Close)
	s := &Service{cfg: Config{Timeout: 2 * time.Second, Now: time.Now}}
	retry := Retry{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond}
	tests := []struct {
		name, url string
		want      []string // each try's outcome: "" delivered, else the error
		received  int
	}{
		{"retried until delivered", rcv.URL + "/flaky", []string{"webhook delivery: status 500", ""}, 2},
		{"given up after the attempts", rcv.URL + "/down", []string{"webhook delivery: status 503", "webhook delivery: status 503", "webhook delivery: status 503"}, 3},
		{"cloud metadata refused", "http://169.254.169.254/latest/meta-data/", []string{"webhook delivery: blocked_address", "webhook delivery: blocked_address", "webhook delivery: blocked_address"}, 0},
	}
	for _, tt := range tests {
		mu.Lock()
		tries = nil
		mu.Unlock()
		var got []string
		s.Hook(tt.url, retry).Send(context.Background(), "msg_alert_1", []byte(`{"a":1}`), func(attempt int, err error) {
			if attempt != len(got)+1 {
				t.Errorf("%s: attempt %d reported after %d", tt.name, attempt, len(got))
			}
			if err == nil {
				got = append(got, "")
			} else {
				got = append(got, err.Error())
			}
		})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: tries mismatch (-want +got):\n%s", tt.name, diff)
		}
		mu.Lock()
		if len(tries) != tt.received {
			t.Errorf("%s: the receiver got %d tries, want %d", tt.name, len(tries), tt.received)
		}
		for _, r := range tries {
			if want := (try{"msg_alert_1", false, "application/json", `{"a":1}`}); r != want {
				t.Errorf("%s: a try came as %+v, want %+v", tt.name, r, want)
			}
		}
		mu.Unlock()
		if strings.Contains(strings.Join(got, " "), "127.0.0.1") {
			t.Errorf("%s: an error quotes the URL: %q", tt.name, got)
		}
	}
}

// TestRetryWait: the wait doubles from Base and stops at Max.
func TestRetryWait(t *testing.T) {
	t.Parallel()
	r := Retry{Attempts: 6, Base: time.Second, Max: time.Minute}
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, r.Wait(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits mismatch (-want +got):\n%s", diff)
	}
}
