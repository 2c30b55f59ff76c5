package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// The console, mounted on the real server, signs in with a real key and
// reads the API in-process with it, showing nothing the key could not.
func TestConsoleSignsInAndReadsTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorkers: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	e.post(key, "k", taskBody("hello", 10), nil)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}

	res, err := c.Get(e.url + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("console page: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res, _ := c.Get(e.url + "/console/api/v1/tasks"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("API through the console without a session: %d, want 401", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/session", strings.NewReader(`{"api_key":"`+key+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sess map[string]any
	_ = json.NewDecoder(res.Body).Decode(&sess)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || sess["role"] != "client" || sess["owner_id"] != "acme" {
		t.Fatalf("sign-in: %d %v", res.StatusCode, sess)
	}
	res, err = c.Get(e.url + "/console/api/v1/tasks")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []any `json:"data"`
	}
	_ = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(list.Data) != 1 {
		t.Errorf("tasks through the console: %d, %d tasks; want 200 and 1", res.StatusCode, len(list.Data))
	}
	// A client's console cannot read the audit log: the API says no.
	if res, _ := c.Get(e.url + "/console/api/v1/audit"); res.StatusCode != http.StatusForbidden {
		t.Errorf("audit through a client's console: %d, want 403", res.StatusCode)
	}
}
