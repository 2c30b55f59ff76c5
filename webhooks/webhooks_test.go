package webhooks

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestScheduleSpansADay: with the default backoff, the attempts of one
// event span more than 24 hours before it is given up.
func TestScheduleSpansADay(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{RetryBase: 30 * time.Second, RetryMax: time.Hour}}
	var total time.Duration
	for attempt := 1; attempt < MaxAttempts; attempt++ {
		d := s.backoff(attempt)
		if attempt > 1 && d < s.backoff(attempt-1) {
			t.Fatalf("backoff shrinks at attempt %d: %v", attempt, d)
		}
		total += d
	}
	if total < 24*time.Hour {
		t.Errorf("%d attempts span %v, want at least 24h", MaxAttempts, total)
	}
	if got := []time.Duration{s.backoff(1), s.backoff(2), s.backoff(3), s.backoff(30)}; got[0] != 30*time.Second ||
		got[1] != time.Minute || got[2] != 2*time.Minute || got[3] != time.Hour {
		t.Errorf("backoff 1, 2, 3, 30 = %v, want 30s 1m 2m 1h", got)
	}
}

// TestSignatureVerifiesWithTheReference: the signature verifies with the
// Standard Webhooks reference library, under each secret it was made with.
func TestSignatureVerifiesWithTheReference(t *testing.T) {
	t.Parallel()
	a, b := newSecret(), newSecret()
	at := time.Now()
	body := []byte(`{"type":"task.succeeded","timestamp":"2026-01-01T00:00:00Z","data":{"id":"x"}}`)
	for _, secrets := range [][]string{{a}, {a, b}} {
		sig, err := signature(secrets, "msg_1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", "msg_1")
		h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		h.Set("webhook-signature", sig)
		for _, s := range secrets {
			wh, err := standardwebhooks.NewWebhook(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(body, h); err != nil {
				t.Errorf("%d secrets: does not verify under one of them: %v", len(secrets), err)
			}
			if err := wh.Verify(append([]byte(nil), append(body, ' ')...), h); err == nil {
				t.Errorf("a changed body verifies")
			}
		}
	}
	if _, err := signature([]string{"not-a-secret"}, "msg_1", at, body); err == nil {
		t.Errorf("a malformed secret signed")
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/tollgate?x=1", true},
		{"http://10.0.0.5:8080/in", true},
		{"ftp://example.com/", false},
		{"javascript:alert(1)", false},
		{"mailto:a@example.com", false},
		{"//example.com/x", false},
		{"/relative", false},
		{"https://u:p@example.com/", false},
		{"https://u@example.com/", false},
		{"https:///nohost", false},
		{"https://example.com/\x00", false},
		{"https://example.com/a b", false},
		{"https://example.com/" + strings.Repeat("a", MaxURLLength), false},
		{"", false},
	}
	for _, c := range cases {
		err := checkURL(c.url)
		var fe *FieldError
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || fe.Field != "url")) {
			t.Errorf("checkURL(%.40q) = %v, want ok %v", c.url, err, c.ok)
		}
	}
}

// TestLinkLocalRefused: cloud metadata and link-local addresses are
// refused at dial time, even for a webhook an admin set with private
// addresses allowed.
func TestLinkLocalRefused(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{Timeout: 2 * time.Second}}
	for _, private := range []bool{false, true} {
		client := newClient(2*time.Second, AddressPolicy{}, private)
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:80/", "http://[fd00:ec2::254]/",
			"http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::1]/", "http://[::ffff:169.254.169.254]/", "http://100.100.100.200/"} {
			if r := s.post(context.Background(), client, signedDelivery{url: u, id: "msg_1", at: time.Now(), sig: "v1,x", body: []byte(`{}`)}); r.class != "blocked_address" {
				t.Errorf("private allowed %v, %s: %+v, want blocked_address", private, u, r)
			}
		}
	}
}
