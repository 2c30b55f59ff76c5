package server_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/accounts"
)

// TestModelsListsEveryUsableModel reads the models through OpenAI's SDK:
// the list holds every name a request may give (the catalog's, then the
// price list's others), sorted, without pass-through's nameless
// placeholder, and retrieve answers one of them or OpenAI's 404.
func TestModelsListsEveryUsableModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{priceList: testPriceList, passThrough: true})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := t.Context()

	var got []string
	iter := client.Models.ListAutoPaging(ctx)
	for iter.Next() {
		m := iter.Current()
		if m.Object != "model" || m.OwnedBy == "" {
			t.Errorf("model %+v, want object model and its provider key", m)
		}
		got = append(got, m.ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"agent-model", "agent-model-b", "backup-model", "cf-model", "chain-model", "gpt-4o-mini",
		"plain-model", "reasoning-model", "small-backup", "test-model", "text-embedding-3-small"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed models mismatch (-want +got):\n%s", diff)
	}

	m, err := client.Models.Get(ctx, "gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpt-4o-mini", "model", "default"}, []string{m.ID, string(m.Object), m.OwnedBy}); diff != "" {
		t.Errorf("retrieved model mismatch (-want +got):\n%s", diff)
	}

	_, err = client.Models.Get(ctx, "no-such-model")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
		t.Errorf("unknown model: %v, want OpenAI's 404 model_not_found", err)
	}
}
