package tasks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/redact"
)

// logKeyDigits is how many hex digits of a stored key's digest a log
// line shows: enough to tell one owner's tasks apart, half the digest.
const logKeyDigits = 16

// logKey is how an idempotency key appears in logs: the beginning of its
// stored form (StoredKey), "h:" and the first digits of its keyed digest.
// That is a digest already, since clients sometimes put meaningful data in
// keys, and the very prefix of the idempotency_key support sees in API
// answers, so a log line and a task can be matched. A key stored in clear
// (before keys were digested) is never logged.
func logKey(stored string) string {
	if !strings.HasPrefix(stored, redact.HashPrefix) {
		return ""
	}
	return stored[:min(len(stored), len(redact.HashPrefix)+logKeyDigits)]
}

// Fields applies the privacy table (redact.Fields) to the short fields
// other packages store: X-Reason, top-up notes, route users.
func (s *Service) Fields() redact.Stored {
	return s.guard.fields()
}

// fields carries out Service.Fields.
func (s *guard) fields() redact.Stored { return redact.NewStored(s.cfg.Redactor, s.digestKey) }

// StoredKey is an idempotency key as tasks.idempotency_key holds it: its
// keyed digest, so support finds a task by the exact key and a dump shows
// none. It never fails.
func (s *Service) StoredKey(key string) string {
	return s.guard.storedKey(key)
}

// storedKey carries out Service.StoredKey.
func (s *guard) storedKey(key string) string {
	return s.fields().Apply(redact.FieldIdempotencyKey, key)
}

// keyedHash is a request hash as tasks.request_hash holds it: HMAC-SHA256
// of the plain hash under the digest key.
func (s *guard) keyedHash(plain []byte) []byte {
	m := hmac.New(sha256.New, s.digestKey)
	m.Write(plain)
	return m.Sum(nil)
}

// Exists reports whether the owner has a task under the idempotency key
// (found by its stored form, StoredKey, as Create finds it). A stored key
// shown in an API answer and sent back as a key is digested again, so it
// never reaches the task it names.
func (s *Service) Exists(ctx context.Context, owner, key string) (bool, error) {
	return s.reader.exists(ctx, owner, key)
}

// exists carries out Service.Exists.
func (s *reader) exists(ctx context.Context, owner, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE owner_id = $1 AND idempotency_key = $2)`, owner, s.guard.storedKey(key)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("tasks: exists: %w", err)
	}
	return ok, nil
}
