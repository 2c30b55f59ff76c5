package tasks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/seal"
)

// storedKeyPattern is the shape of every idempotency key stored as its
// digest (redact.HashPrefix and 32 hex digits, see redact.Digest); any
// other stored key is one kept as sent, before keys were digested.
const storedKeyPattern = `^h:[0-9a-f]{32}$`

// DigestedKeys counts what DigestPlainKeys did.
type DigestedKeys struct {
	Rewritten int64 // tasks whose key and request hash it rewrote
	// Skipped are tasks whose key's digest another task of the owner
	// already holds: the two were admitted under one key, once before
	// and once after keys were digested, and both are left as they are.
	Skipped int64
}

// DigestPlainKeys rewrites the idempotency keys and request hashes of
// tasks stored before they were keyed into their keyed forms (StoredKey,
// keyedHash), batch tasks per short transaction, so that no key a client
// sent stays in the database. Keys and hashes were keyed in one release:
// a task whose key is kept as sent holds its request's plain hash. A key
// sent in the stored shape ("h:" and 32 hex digits) cannot be told from a
// digest and is left alone. A retry under a rewritten key still finds its
// task, as lookupKeys tries the digest first. It is safe to run while
// Tollgate serves, and again: a rewritten task no longer matches. progress,
// when not nil, is called after each batch. It returns what it did before
// any error.
func DigestPlainKeys(ctx context.Context, pool *pgxpool.Pool, sealer *seal.Sealer, batch int, progress func(DigestedKeys)) (DigestedKeys, error) {
	var done DigestedKeys
	if batch < 1 {
		return done, fmt.Errorf("tasks: digest keys: batch must be at least 1, got %d", batch)
	}
	fields := redact.NewStored(nil, sealer.DigestKey())
	after := "00000000-0000-0000-0000-000000000000"
	for {
		var n int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id::text, owner_id, idempotency_key, request_hash FROM tasks
				WHERE id > $1::uuid AND idempotency_key !~ $2 ORDER BY id LIMIT $3 FOR UPDATE`, after, storedKeyPattern, batch)
			if err != nil {
				return err
			}
			type row struct {
				ID, Owner, Key string
				Hash           []byte
			}
			list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
			if err != nil {
				return err
			}
			n = len(list)
			if n == 0 {
				return nil
			}
			after = list[n-1].ID
			ids, keys, hashes := make([]string, n), make([]string, n), make([][]byte, n)
			for i, r := range list {
				ids[i], keys[i], hashes[i] = r.ID, fields.Apply(redact.FieldIdempotencyKey, r.Key), keyHash(sealer.DigestKey(), r.Hash)
			}
			// A key whose digest the owner holds already stays: the unique
			// (owner, key) constraint would refuse the whole batch.
			tag, err := tx.Exec(ctx, `UPDATE tasks t SET idempotency_key = v.key, request_hash = v.hash
				FROM unnest($1::uuid[], $2::text[], $3::bytea[]) AS v(id, key, hash)
				WHERE t.id = v.id AND NOT EXISTS (
					SELECT 1 FROM tasks o WHERE o.owner_id = t.owner_id AND o.idempotency_key = v.key)`, ids, keys, hashes)
			if err != nil {
				return err
			}
			done.Rewritten += tag.RowsAffected()
			done.Skipped += int64(n) - tag.RowsAffected()
			return nil
		})
		if err != nil {
			return done, fmt.Errorf("tasks: digest keys: %w", err)
		}
		if n == 0 {
			return done, nil
		}
		if progress != nil {
			progress(done)
		}
	}
}

// keyHash is HMAC-SHA256 of plain under key: how a request hash is stored.
func keyHash(key, plain []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(plain)
	return m.Sum(nil)
}
