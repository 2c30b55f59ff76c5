package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
)

// TestServeKeepsSecretsOutOfLogsAndMetricsPrivate starts serve with
// credentials in DATABASE_URL (user info and a password parameter) and in
// MODEL_BASE_URL (user info and a query), and with the metrics on their own
// listener behind a token: no log line holds a credential, the metrics
// listener needs the token, and the API's address does not serve the
// metrics without a key.
func TestServeKeepsSecretsOutOfLogsAndMetricsPrivate(t *testing.T) {
	t.Parallel()
	db, err := url.Parse(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	// Trust authentication ignores passwords: these only have to be logged.
	db.User = url.UserPassword(db.User.Username(), "pg-userinfo-s3cret")
	q := db.Query()
	q.Set("password", "pg-param-s3cret")
	db.RawQuery = q.Encode()

	addr, metricsAddr := freeAddr(t), freeAddr(t)
	const token = "metrics-tok-s3cret"
	getenv := envFunc(map[string]string{
		"DATABASE_URL":           db.String(),
		"TOLLGATE_ADDR":          addr,
		"MODEL_BASE_URL":         "https://llm-user:model-userinfo-s3cret@127.0.0.1:1/v1?api-key=model-query-s3cret",
		"TOLLGATE_METRICS_ADDR":  metricsAddr,
		"TOLLGATE_METRICS_TOKEN": token,
	})
	ctx, stop := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("serve did not return within a minute of cancel")
		}
	})
	client := &http.Client{Timeout: 30 * time.Second}
	waitHealthy(t, client, "http://"+addr, done, logs)

	get := func(u, bearer string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := get("http://"+metricsAddr+"/metrics", ""); s != http.StatusUnauthorized {
		t.Errorf("metrics listener without the token: %d, want 401", s)
	}
	if s := get("http://"+metricsAddr+"/metrics", token); s != http.StatusOK {
		t.Errorf("metrics listener with the token: %d, want 200", s)
	}
	if s := get("http://"+addr+"/metrics", ""); s != http.StatusUnauthorized {
		t.Errorf("the API's /metrics without a key: %d, want 401", s)
	}

	if !strings.Contains(logs.String(), `"msg":"tollgate starting"`) {
		t.Fatalf("no start-up line in the logs:\n%s", logs)
	}
	for _, secret := range []string{"pg-userinfo-s3cret", "pg-param-s3cret", "model-userinfo-s3cret", "model-query-s3cret", token} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs hold %q:\n%s", secret, logs)
		}
	}
}
