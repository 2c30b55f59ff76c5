package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Sealer encrypts the bodies that must be kept but never stored in clear.
// AES-256-GCM with a random nonce; the first byte is a format version so
// that keys can be rotated later.
type Sealer struct {
	aead   cipher.AEAD
	digest []byte
}

const version = 1

// New returns a Sealer for a 32-byte key, or an error for a key of
// another length.
func New(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("seal: data key must be 32 bytes, got %d", len(key))
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

// DigestKey keys the digests stored under the hash-only policy and of the
// hashed fields (redact.Digest): derived from the data key, so digests
// cannot be recomputed without it.
func (s *Sealer) DigestKey() []byte { return s.digest }

// Seal encrypts plain; ad binds the ciphertext to its row (the task id) so
// a sealed body cannot be moved to another row.
func (s *Sealer) Seal(plain, ad []byte) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	out[0] = version
	if _, err := rand.Read(out[1:]); err != nil {
		panic(fmt.Sprintf("seal: random nonce: %v", err))
	}
	return s.aead.Seal(out, out[1:1+s.aead.NonceSize()], plain, ad)
}

// ErrCannotOpen is returned when a sealed body cannot be opened: wrong
// key, wrong row, or corrupted.
var ErrCannotOpen = errors.New("seal: sealed body cannot be opened")

// Open decrypts what Seal produced under the same ad. It returns
// ErrCannotOpen for anything else.
func (s *Sealer) Open(sealed, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != version {
		return nil, ErrCannotOpen
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], ad)
	if err != nil {
		return nil, ErrCannotOpen
	}
	return plain, nil
}
