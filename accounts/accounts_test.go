package accounts_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/testdb"
)

func TestKeysAreStoredOnlyAsDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := accounts.NewStore(pool)

	key, err := store.CreateKey(ctx, "acme", accounts.RoleSupport, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "tg_") || len(key) < 40 {
		t.Errorf("key %q: want a tg_ prefix and 256 bits", key[:6])
	}
	p, err := store.Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if p.OwnerID != "acme" || p.Role != accounts.RoleSupport || p.KeyID == "" {
		t.Errorf("principal = %+v", p)
	}
	var dump string
	if err := pool.QueryRow(ctx, `SELECT json_agg(k)::text FROM api_keys k`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, key) || strings.Contains(dump, key[3:]) {
		t.Error("the clear key is stored in api_keys")
	}
	if _, err := pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now()`); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, "", "tg_unknown", key + "x", "nope"} {
		if _, err := store.Authenticate(ctx, k); !errors.Is(err, accounts.ErrUnauthenticated) {
			t.Errorf("Authenticate(%.8q…) = %v, want ErrUnauthenticated", k, err)
		}
	}
}

func TestCreateKeyValidates(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	store := accounts.NewStore(pool)
	if _, err := store.CreateKey(context.Background(), "acme", "root", ""); !errors.Is(err, accounts.ErrInvalid) {
		t.Errorf("bad role: %v, want ErrInvalid", err)
	}
	if _, err := store.CreateKey(context.Background(), "has space", accounts.RoleClient, ""); err == nil {
		t.Error("bad owner accepted")
	}
}
