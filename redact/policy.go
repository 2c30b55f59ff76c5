package redact

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Policy says how much of a record's text is kept. Under every policy
// credentials, card numbers, IBANs and custom matches are replaced; see the
// package documentation for what each one stores.
type Policy string

// The policies an operator can choose.
const (
	PolicyRedact   Policy = "redact"    // store text with every rule applied (the default)
	PolicyHashOnly Policy = "hash-only" // store no text: digests and counts only
	PolicyFull     Policy = "full"      // store text with contact data kept
)

// ErrInvalidPolicy is returned by ParsePolicy for an unknown policy name.
var ErrInvalidPolicy = errors.New("redact: invalid policy")

// ParsePolicy reads a policy name as it appears in configuration. The empty
// string is PolicyRedact. It returns an error wrapping ErrInvalidPolicy for
// any other name it does not know, so that a typo fails start-up instead of
// silently storing more than intended.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return PolicyRedact, nil
	case PolicyRedact, PolicyHashOnly, PolicyFull:
		return p, nil
	}
	return "", fmt.Errorf("%w %q: want %q, %q or %q", ErrInvalidPolicy, s, PolicyRedact, PolicyHashOnly, PolicyFull)
}

// Digest returns a keyed, stable digest of value: the hex encoding of
// HMAC-SHA256(key, value) truncated to 16 bytes (32 hex digits). It is what
// hash-only records store instead of text, and what logs show instead of an
// idempotency key or other secret-ish identifier. Equal values give equal
// digests under one key, so support can match them; without the key a digest
// cannot be checked against a guess. Digest never fails; key must be a
// secret of at least 32 random bytes for that promise to hold.
func Digest(key []byte, value string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(value))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
