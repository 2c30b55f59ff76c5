package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/provider"
)

// withMeta completes a text answer with the fields a parser also fills.
func withMeta(r *provider.Response, model string, u *provider.Usage, status int) *provider.Response {
	r.Model, r.Usage, r.Status = model, u, status
	return r
}

// decodeJSON decodes a body a test server received, failing the test when
// it is not JSON.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %s is not JSON: %v", b, err)
	}
	return v
}
