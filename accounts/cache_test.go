package accounts

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testdb"
)

// Two instances cache the keys they authenticate. The cache answers from
// memory (a change PostgreSQL does not announce goes unseen), yet every
// change that commits reaches both: a revocation by either instance or by
// hand, and a lost listener connection empties the cache.
func TestCachedKeysFollowEveryChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, _ := testdb.NewPool(t)
	a, b := NewStore(pool), NewStore(pool)
	for _, s := range []*Store{a, b} {
		go s.CacheKeys(ctx, CacheOptions{})
		waitLive(t, s)
	}
	newKey := func() (string, string) {
		t.Helper()
		key, err := a.CreateKey(ctx, "acme", RoleClient, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Store{a, b} {
			if _, err := s.Authenticate(ctx, key); err != nil {
				t.Fatalf("fresh key refused: %v", err)
			}
		}
		p, _ := a.Authenticate(ctx, key)
		return key, p.KeyID
	}
	unannounced := func(sql string, args ...any) {
		t.Helper()
		exec(t, pool, `ALTER TABLE api_keys DISABLE TRIGGER USER`)
		exec(t, pool, sql, args...)
		exec(t, pool, `ALTER TABLE api_keys ENABLE TRIGGER USER`)
	}
	refused := func(s *Store, key string) bool {
		_, err := s.Authenticate(ctx, key)
		return errors.Is(err, ErrUnauthenticated)
	}

	t.Run("answered from memory", func(t *testing.T) {
		key, id := newKey()
		unannounced(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, id)
		for _, s := range []*Store{a, b} {
			if refused(s, key) {
				t.Fatal("a cached key was read from the database")
			}
		}
		// The same change, announced: both drop the key.
		exec(t, pool, `UPDATE api_keys SET revoked_at = revoked_at + interval '1 microsecond' WHERE id = $1`, id)
		eventually.Wait(t, "both instances refuse the key", func() bool { return refused(a, key) && refused(b, key) })
	})
	t.Run("revoked by one instance", func(t *testing.T) {
		key, id := newKey()
		if err := a.Revoke(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
		if !refused(a, key) {
			t.Error("the revoking instance still accepts the key")
		}
		eventually.Wait(t, "the other instance refuses the key", func() bool { return refused(b, key) })
	})
	t.Run("revoked by hand in SQL", func(t *testing.T) {
		key, id := newKey()
		exec(t, pool, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, id)
		eventually.Wait(t, "both instances refuse the key", func() bool { return refused(a, key) && refused(b, key) })
	})
	t.Run("deleted by hand in SQL", func(t *testing.T) {
		key, id := newKey()
		exec(t, pool, `DELETE FROM api_keys WHERE id = $1`, id)
		eventually.Wait(t, "both instances refuse the key", func() bool { return refused(a, key) && refused(b, key) })
	})
	t.Run("listener lost", func(t *testing.T) {
		key, id := newKey()
		unannounced(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, id)
		// Every listener of this database loses its connection: what was
		// announced meanwhile is unknown, so the caches start empty.
		exec(t, pool, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %tollgate_api_key_changed%'`)
		eventually.Wait(t, "both instances refuse the key", func() bool { return refused(a, key) && refused(b, key) })
		for _, s := range []*Store{a, b} {
			waitLive(t, s)
		}
	})
}

// A change nothing announces (TRUNCATE, a disabled trigger) is seen once
// the cached entry is older than the TTL.
func TestCachedKeyIsReadAgainAfterItsTTL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, _ := testdb.NewPool(t)
	clock := &testclock.Clock{}
	clock.Set(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	s := NewStore(pool)
	go s.CacheKeys(ctx, CacheOptions{TTL: time.Minute, Now: clock.Now})
	waitLive(t, s)
	key, err := s.CreateKey(ctx, "acme", RoleClient, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, key); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `ALTER TABLE api_keys DISABLE TRIGGER USER`)
	exec(t, pool, `UPDATE api_keys SET revoked_at = now()`)
	clock.Set(clock.Now().Add(59 * time.Second))
	if _, err := s.Authenticate(ctx, key); err != nil {
		t.Fatalf("within the TTL: %v, want the cached answer", err)
	}
	clock.Set(clock.Now().Add(time.Second))
	if _, err := s.Authenticate(ctx, key); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after the TTL: %v, want ErrUnauthenticated", err)
	}
}

// The cache holds at most MaxKeys keys.
func TestKeyCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := &keyCache{entries: map[[32]byte]cachedKey{}, ttl: time.Minute, max: 3, now: time.Now, live: true}
	for i := range 10 {
		c.put([32]byte{byte(i)}, Principal{KeyID: "k"}, c.gen)
	}
	if n := len(c.entries); n != 3 {
		t.Errorf("%d keys cached, want 3", n)
	}
	// A read that started before a change heard since is not cached.
	gen := c.gen
	c.drop("other")
	c.put([32]byte{42}, Principal{KeyID: "x"}, gen)
	if _, ok := c.entries[[32]byte{42}]; ok {
		t.Error("a read older than a change was cached")
	}
}

func waitLive(t *testing.T, s *Store) {
	t.Helper()
	eventually.Wait(t, "the key cache's listener", func() bool {
		c := s.cache.Load()
		if c == nil {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.live
	})
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
