package accounts

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/pglisten"
)

// keyChangedChannel is where PostgreSQL announces every change to an API
// key, with the key's id (the api_keys_changed trigger).
const keyChangedChannel = "tollgate_api_key_changed"

// CacheOptions tune the key cache; zero values take the defaults.
type CacheOptions struct {
	// TTL bounds how long a key is answered from memory without reading
	// its row again (default 1 minute). Revocations do not wait for it:
	// they are pushed (see CacheKeys). It is what bounds a change that no
	// notification could announce (TRUNCATE).
	TTL time.Duration
	// MaxKeys bounds the keys held (default 10,000); past it, some are
	// dropped to make room.
	MaxKeys int
	Logger  *slog.Logger
	Now     func() time.Time
}

// keyCache holds authenticated keys by digest. It is used only while its
// listener is connected (live): a notification missed while it was not
// could leave a revoked key in it, so each (re)connection starts it empty.
type keyCache struct {
	mu   sync.Mutex
	live bool
	// gen counts changes heard; a read of the database that started
	// before one may carry the key's state from before it, and is not
	// cached.
	gen     uint64
	entries map[[32]byte]cachedKey
	ttl     time.Duration
	max     int
	now     func() time.Time
}

type cachedKey struct {
	p  Principal
	at time.Time
}

// CacheKeys makes s answer keys it has authenticated from memory, and
// holds, until ctx ends, the LISTEN connection that keeps that memory
// true: a key revoked or changed by any instance, any command or by hand
// in SQL is dropped from every instance's cache when the change commits
// (PostgreSQL announces it; this instance's own revocations drop it at
// once). While the connection is down the cache is bypassed, and it
// restarts empty. Call it once, before serving; it returns when ctx ends.
func (s *Store) CacheKeys(ctx context.Context, o CacheOptions) {
	c := &keyCache{entries: map[[32]byte]cachedKey{}, ttl: o.TTL, max: o.MaxKeys, now: o.Now}
	if c.ttl <= 0 {
		c.ttl = time.Minute
	}
	if c.max <= 0 {
		c.max = 10_000
	}
	if c.now == nil {
		c.now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.cache.Store(c)
	pglisten.Run(ctx, s.pool, keyChangedChannel, "API key change listener", log, pglisten.Handler{
		Listening: func() { c.reset(true) },
		Lost:      func() { c.reset(false) },
		Notify:    c.drop,
	})
	c.reset(false)
}

// reset empties the cache and sets whether it may be used.
func (c *keyCache) reset(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.live = live
	clear(c.entries)
}

// get returns the cached principal of digest, or the generation a read of
// the database must start from to be cached (see put).
func (c *keyCache) get(digest [32]byte) (p Principal, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return Principal{}, false, 0
	}
	e, ok := c.entries[digest]
	if ok && c.now().Sub(e.at) < c.ttl && (e.p.ExpiresAt == nil || c.now().Before(*e.p.ExpiresAt)) {
		return e.p, true, c.gen
	}
	return Principal{}, false, c.gen
}

// put caches p, read from the database in generation gen, unless a change
// was heard since (the read may predate it) or the cache is not live.
func (c *keyCache) put(digest [32]byte, p Principal, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.gen != gen {
		return
	}
	if _, ok := c.entries[digest]; !ok && len(c.entries) >= c.max {
		for d := range c.entries { // an arbitrary victim: map order
			delete(c.entries, d)
			break
		}
	}
	c.entries[digest] = cachedKey{p: p, at: c.now()}
}

// drop forgets the key with id keyID.
func (c *keyCache) drop(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for d, e := range c.entries {
		if e.p.KeyID == keyID {
			delete(c.entries, d)
		}
	}
}
