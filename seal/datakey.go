package seal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DataKey returns the key from TOLLGATE_DATA_KEY (env: base64, 32 bytes)
// when set, and otherwise the database's own key, generated on first use
// and shared by every instance. fromDB reports the latter, which the
// caller should warn about: a database dump then holds the key with the
// data. It returns an error for an env that is not such a key, or when the
// database cannot be read.
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
		return nil, false, fmt.Errorf("seal: data key: %w", err)
	}
	return key, true, nil
}
