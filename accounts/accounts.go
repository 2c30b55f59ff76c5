// Package accounts owns owners and their API keys: who may call Tollgate and
// in which role.
//
// A key is shown once, at creation, and stored only as its SHA-256 digest.
// Keys are 256 random bits, so a fast digest is as strong as a slow one and
// authentication stays a single index probe on every request.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Role decides what a key may see.
type Role string

// The roles. A client sees its own owner's data; support may read any
// owner's replay records; finance may read any owner's usage; admin may do
// both.
const (
	RoleClient  Role = "client"
	RoleSupport Role = "support"
	RoleFinance Role = "finance"
	RoleAdmin   Role = "admin"
)

// ParseRole returns ErrInvalid for anything but the four roles.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleClient, RoleSupport, RoleFinance, RoleAdmin:
		return r, nil
	}
	return "", invalid("role %q is not one of client, support, finance, admin", s)
}

// Errors returned by this package.
var (
	ErrInvalid         = errors.New("accounts: invalid")
	ErrUnauthenticated = errors.New("accounts: unknown or revoked key")
)

// keyPrefix marks Tollgate keys so that secret scanners and people can
// recognise one.
const keyPrefix = "tg_"

var ownerFormat = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidOwner reports whether s may name an owner.
func ValidOwner(s string) bool { return ownerFormat.MatchString(s) }

// Principal is the authenticated caller of one request.
type Principal struct {
	KeyID    string
	OwnerID  string
	Role     Role
	Workload string // the key's workload; its tasks also count against that workload's budget
	// ExpiresAt is when the key stops authenticating; nil for never. A
	// cached principal is not answered past it.
	ExpiresAt *time.Time
}

// Store reads and writes owners and keys.
type Store struct {
	pool  *pgxpool.Pool
	cache atomic.Pointer[keyCache] // set by CacheKeys; nil reads every key from the database
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// InvalidError is an argument out of range: Detail says what is refused
// and why, in words fit for a client (it names the field and never
// echoes a secret). It is ErrInvalid; the HTTP layer answers it as a 400
// with Detail, reading no error text.
type InvalidError struct {
	Detail string
	err    error // the refusal of another package it stands for, if any
}

func (e *InvalidError) Error() string { return "accounts: invalid: " + e.Detail }

// Is makes an *InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func (e *InvalidError) Unwrap() error { return e.err }

// InvalidDetail is Detail, for callers that map any package's refusal.
func (e *InvalidError) InvalidDetail() string { return e.Detail }

// invalid is an *InvalidError of the formatted detail.
func invalid(format string, args ...any) error {
	return &InvalidError{Detail: fmt.Sprintf(format, args...)}
}

// EnsureOwnerTx creates the owner if it does not exist. It returns ErrInvalid
// for a malformed owner id.
func EnsureOwnerTx(ctx context.Context, tx pgx.Tx, owner string) error {
	if !ValidOwner(owner) {
		return invalid("owner %q must be 1-64 letters, digits, '.', '_' or '-'", owner)
	}
	_, err := tx.Exec(ctx, `INSERT INTO owners (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, owner)
	if err != nil {
		return fmt.Errorf("accounts: ensure owner: %w", err)
	}
	return nil
}

// KeyParams describe a key to create.
type KeyParams struct {
	Owner    string
	Role     Role
	Workload string // "" for none; groups keys under a workload budget
	Name     string // for people: what the key is for; at most 200 characters
	// ExpiresAt, when set, is when the key stops authenticating, as if
	// revoked then.
	ExpiresAt *time.Time
	// Actor is who creates the key (the CLI, or an admin key over HTTP),
	// kept as created_by.
	Actor string
}

// MaxKeyName bounds a key's name.
const MaxKeyName = 200

// CreateKey creates a key for owner with role and workload, by the CLI's
// defaults; see NewKey.
func (s *Store) CreateKey(ctx context.Context, owner string, role Role, workload string) (key string, err error) {
	k, err := s.NewKey(ctx, KeyParams{Owner: owner, Role: role, Workload: workload, Actor: "cli"})
	return k.Secret, err
}

// NewKey creates the owner if needed and a new key for it, returning the
// key with its secret in clear. This is the only time the clear key exists
// anywhere: the store keeps its SHA-256 digest.
func (s *Store) NewKey(ctx context.Context, p KeyParams) (Key, error) {
	if _, err := ParseRole(string(p.Role)); err != nil {
		return Key{}, err
	}
	if p.Workload != "" && !ValidOwner(p.Workload) {
		return Key{}, invalid("workload %q must be 1-64 letters, digits, '.', '_' or '-'", p.Workload)
	}
	if utf8.RuneCountInString(p.Name) > MaxKeyName {
		return Key{}, invalid("name must be at most %d characters", MaxKeyName)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, fmt.Errorf("accounts: random key: %w", err)
	}
	secret := keyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	digest := sha256.Sum256([]byte(secret))
	var k Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := EnsureOwnerTx(ctx, tx, p.Owner); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			INSERT INTO api_keys (owner_id, role, key_hash, key_prefix, workload, name, expires_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			RETURNING `+keyColumns, p.Owner, string(p.Role), digest[:], secret[:len(keyPrefix)+4], p.Workload, p.Name, p.ExpiresAt, p.Actor)
		if err != nil {
			return err
		}
		k, err = pgx.CollectExactlyOneRow(rows, scanKey)
		return err
	})
	if err != nil {
		return Key{}, fmt.Errorf("accounts: create key: %w", err)
	}
	k.Secret = secret
	return k, nil
}

// Authenticate returns the principal for a clear key, or ErrUnauthenticated.
func (s *Store) Authenticate(ctx context.Context, key string) (Principal, error) {
	if !strings.HasPrefix(key, keyPrefix) || len(key) > 128 {
		return Principal{}, ErrUnauthenticated
	}
	digest := sha256.Sum256([]byte(key))
	c := s.cache.Load()
	var gen uint64
	if c != nil {
		p, ok, g := c.get(digest)
		if ok {
			return p, nil
		}
		gen = g
	}
	p, err := s.authenticate(ctx, digest)
	if err == nil && c != nil {
		c.put(digest, p, gen)
	}
	return p, err
}

// authenticate reads the principal of a key's digest: a key neither
// revoked nor expired. It also notes when the key was last used, at most
// once a minute per key: a write once a minute rather than per request,
// which is not announced as a change (the api_keys_updated trigger), so the key stays
// cached everywhere.
func (s *Store) authenticate(ctx context.Context, digest [32]byte) (Principal, error) {
	var p Principal
	var role string
	var stored []byte
	err := s.pool.QueryRow(ctx, `
		WITH k AS (
			SELECT id, owner_id, role, workload, key_hash, expires_at, last_used_at FROM api_keys
			WHERE key_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		), touched AS (
			UPDATE api_keys SET last_used_at = now() FROM k
			WHERE api_keys.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
		)
		SELECT id::text, owner_id, role, workload, key_hash, expires_at FROM k`,
		digest[:]).Scan(&p.KeyID, &p.OwnerID, &role, &p.Workload, &stored, &p.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("accounts: authenticate: %w", err)
	}
	// The index found the row by digest; compare again in constant time so
	// that no code path compares secrets byte by byte.
	if subtle.ConstantTimeCompare(stored, digest[:]) != 1 {
		return Principal{}, ErrUnauthenticated
	}
	p.Role = Role(role)
	return p, nil
}

// Privacy is an owner's data policy.
type Privacy struct {
	OwnerID               string `json:"owner_id"`
	RedactionPolicy       string `json:"redaction_policy"` // redact, hash-only or full
	BodyRetentionDays     int    `json:"body_retention_days"`
	MetadataRetentionDays int    `json:"metadata_retention_days"`
}

// ErrNotFound: no such owner.
var ErrNotFound = errors.New("accounts: no such owner")

// ErrKeyNotFound: no such key, or it is already revoked.
var ErrKeyNotFound = errors.New("accounts: no such active key")

// GetPrivacy returns the owner's policy, or ErrNotFound.
func (s *Store) GetPrivacy(ctx context.Context, owner string) (Privacy, error) {
	p := Privacy{OwnerID: owner}
	err := s.pool.QueryRow(ctx, `SELECT redaction_policy, body_retention_days, metadata_retention_days FROM owners WHERE id = $1`, owner).
		Scan(&p.RedactionPolicy, &p.BodyRetentionDays, &p.MetadataRetentionDays)
	if errors.Is(err, pgx.ErrNoRows) {
		return Privacy{}, ErrNotFound
	}
	if err != nil {
		return Privacy{}, fmt.Errorf("accounts: privacy: %w", err)
	}
	return p, nil
}

// MaxRetentionDays bounds a retention period: ten years, in days (the
// least is one day).
const MaxRetentionDays = 3650

// SetPrivacy sets the owner's policy (creating the owner if needed). New
// tasks follow it; stored records keep the policy they were written under.
// It returns ErrInvalid for an unknown policy or bad retention.
func (s *Store) SetPrivacy(ctx context.Context, p Privacy) (Privacy, error) {
	switch p.RedactionPolicy {
	case "redact", "hash-only", "full":
	default:
		return Privacy{}, invalid("redaction_policy must be redact, hash-only or full")
	}
	if p.BodyRetentionDays < 1 || p.BodyRetentionDays > MaxRetentionDays || p.MetadataRetentionDays < p.BodyRetentionDays || p.MetadataRetentionDays > MaxRetentionDays {
		return Privacy{}, invalid("retention must be 1-%d days, metadata at least as long as bodies", MaxRetentionDays)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := EnsureOwnerTx(ctx, tx, p.OwnerID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE owners SET redaction_policy = $2, body_retention_days = $3, metadata_retention_days = $4 WHERE id = $1`,
			p.OwnerID, p.RedactionPolicy, p.BodyRetentionDays, p.MetadataRetentionDays)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return Privacy{}, err
		}
		return Privacy{}, fmt.Errorf("accounts: set privacy: %w", err)
	}
	return p, nil
}

// Key is an API key as operators see it, in the JSON of the keys API.
// Secret, the key in clear, is set only in NewKey's answer: it is never
// stored, and never listed.
type Key struct {
	ID         string     `json:"id"`
	Secret     string     `json:"key,omitempty"`
	OwnerID    string     `json:"owner"`
	Role       Role       `json:"role"`
	Workload   string     `json:"workload"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedBy  string     `json:"created_by"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	RevokedBy  *string    `json:"revoked_by"`
}

// keyColumns are the columns scanKey reads.
const keyColumns = `id::text, owner_id, role, workload, name, key_prefix, created_at, created_by, expires_at, last_used_at, revoked_at, revoked_by`

func scanKey(r pgx.CollectableRow) (Key, error) {
	var k Key
	var role string
	err := r.Scan(&k.ID, &k.OwnerID, &role, &k.Workload, &k.Name, &k.Prefix, &k.CreatedAt, &k.CreatedBy, &k.ExpiresAt,
		&k.LastUsedAt, &k.RevokedAt, &k.RevokedBy)
	k.Role = Role(role)
	return k, err
}

// ListKeys returns the owner's keys ("" for every owner), newest first.
func (s *Store) ListKeys(ctx context.Context, owner string) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys
		WHERE $1 = '' OR owner_id = $1 ORDER BY created_at DESC, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("accounts: list keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("accounts: list keys: %w", err)
	}
	return keys, nil
}

// Revoke revokes a key by id, actor naming who revoked it. A revoked key fails at once here, and on
// every other instance as soon as PostgreSQL's announcement of the change
// reaches it (see CacheKeys). It returns ErrKeyNotFound for an unknown or
// already revoked key.
func (s *Store) Revoke(ctx context.Context, keyID, actor string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id::text = $1 AND revoked_at IS NULL`, keyID, actor)
	if err != nil {
		return fmt.Errorf("accounts: revoke: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrKeyNotFound
	}
	if c := s.cache.Load(); c != nil {
		c.drop(keyID)
	}
	return nil
}
