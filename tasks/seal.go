package tasks

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sealer encrypts the bodies that must be kept but never stored in clear:
// the raw request a worker sends to the provider, and the output a client
// polls for. AES-256-GCM with a random nonce; the first byte is a format
// version so that keys can be rotated later.
type Sealer struct {
	aead   cipher.AEAD
	digest []byte
}

const sealVersion = 1

// NewSealer returns a Sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("tasks: data key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	d := hmac.New(sha256.New, key)
	d.Write([]byte("tollgate digest key v1"))
	return &Sealer{aead: aead, digest: d.Sum(nil)}, nil
}

// digestKey keys the digests stored under the hash-only policy: derived
// from the data key, so digests cannot be recomputed without it.
func (s *Sealer) digestKey() []byte { return s.digest }

// Seal encrypts plain; ad binds the ciphertext to its row (the task id) so
// a sealed body cannot be moved to another task.
func (s *Sealer) Seal(plain, ad []byte) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		panic(fmt.Sprintf("tasks: random nonce: %v", err))
	}
	return s.aead.Seal(out, out[1:1+s.aead.NonceSize()], plain, ad)
}

// ErrSealed is returned when a sealed body cannot be opened: wrong key,
// wrong row, or corrupted.
var ErrSealed = errors.New("tasks: sealed body cannot be opened")

// Open decrypts what Seal produced.
func (s *Sealer) Open(sealed, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != sealVersion {
		return nil, ErrSealed
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], ad)
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}

// DataKey returns the key from TOLLGATE_DATA_KEY (base64, 32 bytes) when
// set, and otherwise the database's own key, generated on first use and
// shared by every instance. fromDB reports the latter, which the caller
// should warn about: a database dump then holds the key with the data.
func DataKey(ctx context.Context, pool *pgxpool.Pool, env string) (key []byte, fromDB bool, err error) {
	if env != "" {
		key, err = base64.StdEncoding.DecodeString(env)
		if err != nil || len(key) != 32 {
			return nil, false, errors.New("TOLLGATE_DATA_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)")
		}
		return key, false, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, false, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO data_keys (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT key FROM data_keys WHERE id = 1`).Scan(&key)
	})
	if err != nil {
		return nil, false, fmt.Errorf("tasks: data key: %w", err)
	}
	return key, true, nil
}
