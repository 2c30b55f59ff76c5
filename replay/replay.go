// Package replay owns the historical record of every model call: what was
// asked, with which parameters and timeouts, and what came back or how it
// failed. Support staff read these records to see exactly what happened,
// instead of calling a model that has since changed.
//
// A record is written in the same transaction that finishes its attempt, so
// a finished attempt always has one. Serving a record only reads the
// database: a replay never calls a model. Every read is audited.
//
// Records hold the provider's classified error (class, status, code), never
// its raw message, which can echo prompt text or account details.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrInvalid is returned for a record that cannot be stored.
var ErrInvalid = errors.New("replay: invalid record")

// Parameters are what was sent to the provider on the attempt, beyond the
// stored request: the output limit under the name it was sent with, and
// digests that say which tool list and which images a call carried without
// holding them.
type Parameters struct {
	Model string `json:"model"`
	// MaxTokens is the output limit actually sent (the client's, else
	// Tollgate's default), whichever name carried it; OutputLimitParam is
	// that name: max_tokens or max_completion_tokens.
	MaxTokens        int    `json:"max_tokens"`
	OutputLimitParam string `json:"output_limit_param,omitempty"`
	// Choices is n, when more than one choice was asked for.
	Choices int `json:"n,omitempty"`
	// Tools is how many tools were offered; ToolsSHA256 the SHA-256 (hex)
	// of their canonical JSON (the tools array as sent, keys sorted), so
	// support can tell which version of a tool list a call used.
	Tools       int    `json:"tools,omitempty"`
	ToolsSHA256 string `json:"tools_sha256,omitempty"`
	// ResponseFormat is the response_format type asked for: text,
	// json_object or json_schema (SchemaName names the schema).
	ResponseFormat string `json:"response_format,omitempty"`
	SchemaName     string `json:"schema_name,omitempty"`
	// Images are the request's images, in order: described, never held.
	Images []Image `json:"images,omitempty"`
	// Inputs, Dimensions and EncodingFormat describe an embeddings call:
	// how many texts it embedded, the vector length asked for (0: the
	// model's own) and the format the client asked for.
	Inputs         int    `json:"inputs,omitempty"`
	Dimensions     int    `json:"dimensions,omitempty"`
	EncodingFormat string `json:"encoding_format,omitempty"`
}

// Image describes one image of a request: a data URL by its media type,
// size and SHA-256; a URL by its redacted form (a signed URL's query string
// carries secrets, so it is never kept). The bytes themselves are sealed
// with the raw request.
type Image struct {
	Message   int    `json:"message"` // index of its message
	MediaType string `json:"media_type,omitempty"`
	Bytes     int    `json:"bytes,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	URL       string `json:"url,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Usage is token usage as the provider reported it, by class: cached and
// cache-write tokens are part of the input, reasoning tokens part of the
// output.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoning_tokens,omitempty"`
}

// Response is what the provider answered, its texts redacted as stored:
// the first choice's content, tool calls and refusal, and every choice
// when several were asked for.
type Response struct {
	Content           string     `json:"content"`
	ToolCalls         []ToolCall `json:"tool_calls,omitempty"`
	Refusal           string     `json:"refusal,omitempty"`
	FinishReason      string     `json:"finish_reason"`
	Choices           []Choice   `json:"choices,omitempty"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint,omitempty"`
	Usage             *Usage     `json:"usage"`
	// Embedding describes an embeddings answer; its vectors are never
	// held here.
	Embedding *Embedding `json:"embedding,omitempty"`
}

// Embedding describes an embeddings answer without holding it: how many
// vectors, their length, and the hex SHA-256 of the vectors as
// little-endian float32 values one after the other.
type Embedding struct {
	Count      int    `json:"count"`
	Dimensions int    `json:"dimensions"`
	SHA256     string `json:"sha256"`
}

// Choice is one choice of an answer that had several.
type Choice struct {
	Index        int        `json:"index"`
	Content      string     `json:"content"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	Refusal      string     `json:"refusal,omitempty"`
	FinishReason string     `json:"finish_reason"`
}

// ToolCall is one call the model asked for; Arguments is the JSON text the
// model produced, redacted as stored.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Failure is a classified provider failure.
type Failure struct {
	Class          string `json:"class"`
	Code           string `json:"code"`
	ProviderStatus int    `json:"provider_status"`
}

// Attempt is the record of one provider call.
type Attempt struct {
	TaskID        string     `json:"-"`
	OwnerID       string     `json:"-"`
	Attempt       int        `json:"attempt"`
	State         string     `json:"state"` // succeeded, failed or ambiguous
	Provider      string     `json:"provider"`
	ProviderModel string     `json:"provider_model"`
	Parameters    Parameters `json:"parameters"`
	TimeoutMS     int        `json:"timeout_ms"`
	Response      *Response  `json:"response"`
	Error         *Failure   `json:"error"`
	StartedAt     time.Time  `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	LatencyMS     *int       `json:"latency_ms"`
	TraceID       string     `json:"trace_id"`
	BuildVersion  string     `json:"build_version"`
	// Stream is set for a streamed attempt.
	Stream *StreamInfo `json:"stream"`
	// Redactions counts the placeholders redaction put in this record, by
	// type ({"EMAIL": 2}), so support can tell what was removed.
	Redactions map[string]int `json:"redactions"`

	// A flat summary for support, derived when a record is read: the model
	// name clients used, when the call left, and its outcome (unknown for an
	// ambiguous attempt, which may or may not have run at the provider).
	Model          string  `json:"model"`
	SentAt         string  `json:"sent_at"`
	Outcome        string  `json:"outcome"`
	Class          *string `json:"class"`
	Code           *string `json:"code"`
	ProviderStatus *int    `json:"provider_status"`
}

// summarise fills the derived fields.
func (a *Attempt) summarise() {
	a.Model = a.Parameters.Model
	a.SentAt = a.StartedAt.UTC().Format(time.RFC3339Nano)
	switch a.State {
	case "succeeded", "failed":
		a.Outcome = a.State
	default:
		a.Outcome = "unknown"
	}
	if a.Error != nil {
		a.Class, a.Code = &a.Error.Class, &a.Error.Code
		if a.Error.ProviderStatus != 0 {
			a.ProviderStatus = &a.Error.ProviderStatus
		}
	}
}

// InsertTx stores the record of a finished attempt in the caller's
// transaction. Writing the same attempt twice keeps the first record: a
// record is history and is never overwritten.
func InsertTx(ctx context.Context, tx pgx.Tx, a Attempt) error {
	b := &pgx.Batch{}
	if err := QueueInsert(b, a); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// QueueInsert queues InsertTx's statement on b, for a caller that sends
// the record with the rest of its transaction in one round trip. It
// returns ErrInvalid at once for a record without task or attempt.
func QueueInsert(b *pgx.Batch, a Attempt) error {
	if a.TaskID == "" || a.Attempt < 1 {
		return fmt.Errorf("%w: task id and attempt >= 1 are required", ErrInvalid)
	}
	params, err := json.Marshal(a.Parameters)
	if err != nil {
		return fmt.Errorf("replay: encode parameters: %w", err)
	}
	b.Queue(`
		INSERT INTO replay_records (task_id, attempt, owner_id, state, provider, provider_model, parameters,
		                            timeout_ms, response, error, started_at, finished_at, latency_ms,
		                            trace_id, build_version, redactions, stream)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (task_id, attempt) DO NOTHING`,
		a.TaskID, a.Attempt, a.OwnerID, a.State, a.Provider, a.ProviderModel, params, a.TimeoutMS,
		a.Response, a.Error, a.StartedAt, a.FinishedAt, a.LatencyMS, a.TraceID, a.BuildVersion, redactions(a.Redactions), a.Stream,
	).Exec(func(pgconn.CommandTag) error { return nil })
	return nil
}

// Store reads records.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// attemptColumns are the columns scanAttempt reads, from replay_records.
const attemptColumns = `task_id::text, attempt, owner_id, state, provider, provider_model, parameters, timeout_ms,
	response, error, started_at, finished_at, latency_ms, trace_id, build_version, redactions, stream`

func scanAttempt(r pgx.CollectableRow) (Attempt, error) {
	var a Attempt
	err := r.Scan(&a.TaskID, &a.Attempt, &a.OwnerID, &a.State, &a.Provider, &a.ProviderModel,
		&a.Parameters, &a.TimeoutMS, &a.Response, &a.Error, &a.StartedAt, &a.FinishedAt, &a.LatencyMS,
		&a.TraceID, &a.BuildVersion, &a.Redactions, &a.Stream)
	a.summarise()
	return a, err
}

// collectAttempts reads a task's records, never nil.
func collectAttempts(rows pgx.Rows, err error) ([]Attempt, error) {
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, scanAttempt)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Attempt{}
	}
	return out, nil
}

// Attempts returns the task's records, oldest attempt first; an empty slice
// when the task has none yet.
func (s *Store) Attempts(ctx context.Context, taskID string) ([]Attempt, error) {
	out, err := collectAttempts(s.pool.Query(ctx, `
		SELECT `+attemptColumns+` FROM replay_records WHERE task_id = $1 ORDER BY attempt`, taskID))
	if err != nil {
		return nil, fmt.Errorf("replay: attempts: %w", err)
	}
	return out, nil
}

// AuditedAttempts appends the read to the audit trail and returns a.TaskID's
// records, oldest attempt first, in one statement: the records come back
// only if the audit row was written, and both cost one round trip and one
// commit. It returns an error, and no records, when either fails.
func (s *Store) AuditedAttempts(ctx context.Context, a Access) ([]Attempt, error) {
	out, err := collectAttempts(s.pool.Query(ctx, `
		WITH audit AS (
			INSERT INTO replay_audit (task_id, owner_id, actor_owner, actor_key_id, actor_role, reason)
			VALUES ($1, $2, $3, $4, $5, $6)
		)
		SELECT `+attemptColumns+` FROM replay_records WHERE task_id = $1 ORDER BY attempt`,
		a.TaskID, a.OwnerID, a.ActorOwner, a.ActorKeyID, a.ActorRole, a.Reason))
	if err != nil {
		return nil, fmt.Errorf("replay: audited attempts: %w", err)
	}
	return out, nil
}

// Access is one read of a record, for the audit trail.
type Access struct {
	TaskID     string
	OwnerID    string // owner of the record
	ActorOwner string
	ActorKeyID string
	ActorRole  string
	Reason     string
}

func redactions(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// EraseTx removes the texts of the tasks' records (response content, tool
// calls, refusal, choices; the image descriptions of the parameters) and
// keeps everything else: a record's shape, timings, classes and usage stay
// for support and finance after its bodies are gone.
func EraseTx(ctx context.Context, tx pgx.Tx, taskIDs []string) error {
	_, err := tx.Exec(ctx, `
		UPDATE replay_records
		SET response = CASE WHEN response IS NULL THEN NULL
		                    ELSE response - 'content' - 'tool_calls' - 'refusal' - 'choices' || '{"content": ""}'::jsonb END,
		    parameters = parameters - 'images' - 'schema_name'
		WHERE task_id = ANY($1) AND (response IS NOT NULL OR parameters ? 'images' OR parameters ? 'schema_name')`, taskIDs)
	if err != nil {
		return fmt.Errorf("replay: erase: %w", err)
	}
	return nil
}

// AuditEntry is one audited read.
type AuditEntry struct {
	ID         int64     `json:"id"`
	TaskID     string    `json:"task_id"`
	OwnerID    string    `json:"owner_id"`
	ActorOwner string    `json:"actor_owner"`
	ActorKeyID string    `json:"actor_key_id"`
	ActorRole  string    `json:"actor_role"`
	Reason     string    `json:"reason"`
	AccessedAt time.Time `json:"accessed_at"`
}

// AuditFilter selects audit entries, newest first; Before is the id to
// continue below (0 for the first page).
type AuditFilter struct {
	TaskID  string
	OwnerID string
	Before  int64
	Limit   int
}

// AuditLog lists audited reads, newest first, and whether more remain.
func (s *Store) AuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, bool, error) {
	limit := min(max(f.Limit, 1), 500)
	rows, err := s.pool.Query(ctx, `
		SELECT id, task_id::text, owner_id, actor_owner, actor_key_id::text, actor_role, reason, accessed_at
		FROM replay_audit
		WHERE ($1 = '' OR task_id::text = $1) AND ($2 = '' OR owner_id = $2) AND ($3 = 0 OR id < $3)
		ORDER BY id DESC LIMIT $4`, f.TaskID, f.OwnerID, f.Before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("replay: audit log: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var a AuditEntry
		return a, r.Scan(&a.ID, &a.TaskID, &a.OwnerID, &a.ActorOwner, &a.ActorKeyID, &a.ActorRole, &a.Reason, &a.AccessedAt)
	})
	if err != nil {
		return nil, false, fmt.Errorf("replay: audit log: %w", err)
	}
	more := len(list) > limit
	if more {
		list = list[:limit]
	}
	if list == nil {
		list = []AuditEntry{}
	}
	return list, more, nil
}

// StreamInfo records what a streamed answer's client received: how many
// chunks, and when it went away if it did. The upstream call completes and
// is settled whatever the client does.
type StreamInfo struct {
	ChunksSent           int        `json:"chunks_sent"`
	ClientDisconnectedAt *time.Time `json:"client_disconnected_at"`
}
