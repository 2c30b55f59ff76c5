package tasks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/seal"
)

// Get returns the owner's task as a client is answered (its Request holds
// only the metadata; Record has the whole stored request), or ErrNotFound,
// also for another owner's task: its existence is not disclosed.
func (s *Service) Get(ctx context.Context, owner, id string) (Task, error) {
	return s.reader.get(ctx, owner, id)
}

// get carries out Service.Get.
func (s *reader) get(ctx context.Context, owner, id string) (Task, error) {
	return s.read(ctx, clientViewColumns, owner, id)
}

// GetAny is Get for any owner's task, for roles that may read across
// owners.
func (s *Service) GetAny(ctx context.Context, id string) (Task, error) {
	return s.reader.getAny(ctx, id)
}

// getAny carries out Service.GetAny.
func (s *reader) getAny(ctx context.Context, id string) (Task, error) {
	return s.read(ctx, clientViewColumns, "", id)
}

// Record returns the owner's task (any owner's for "") with its whole
// stored request, as redacted under the owner's policy: what a replay
// record shows. It returns ErrNotFound as Get does.
func (s *Service) Record(ctx context.Context, owner, id string) (Task, error) {
	return s.reader.record(ctx, owner, id)
}

// record carries out Service.Record.
func (s *reader) record(ctx context.Context, owner, id string) (Task, error) {
	return s.read(ctx, taskColumns, owner, id)
}

// read reads the owner's task (any owner's for "") with columns
// (taskColumns or clientViewColumns).
func (s *reader) read(ctx context.Context, columns, owner, id string) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, ErrNotFound
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM tasks WHERE id = $1 AND ($2 = '' OR owner_id = $2)`, id, owner)
	if err != nil {
		return Task{}, fmt.Errorf("tasks: get: %w", err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTask)
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("tasks: get: %w", err)
	}
	s.guard.reveal(&t)
	return t, nil
}

// rawRequest opens the sealed raw request: what the provider must see.
func (s *guard) rawRequest(t Task) (Request, error) {
	if len(t.payload) == 0 {
		return Request{}, seal.ErrCannotOpen
	}
	plain, err := s.cfg.Sealer.Open(t.payload, []byte(t.ID))
	if err != nil {
		return Request{}, err
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	return r, dec.Decode(&r)
}

// Page is one page of a listing.
type Page struct {
	Tasks      []Task
	NextCursor string // empty on the last page
}

// ListParams choose a page of an owner's tasks. The filters are optional:
// a zero value does not filter.
type ListParams struct {
	Owner  string
	Cursor string // from the previous page; opaque to clients
	Limit  int    // 1-100
	Status Status
	Model  string
	// Workload matches the workload the task was created in.
	Workload string
	// CreatedAfter and CreatedBefore bound created_at, both exclusive.
	CreatedAfter, CreatedBefore time.Time
}

// List returns a page of the owner's tasks, newest first. A malformed
// cursor returns ErrInvalidCursor.
func (s *Service) List(ctx context.Context, p ListParams) (Page, error) {
	return s.reader.list(ctx, p)
}

// list carries out Service.List.
func (s *reader) list(ctx context.Context, p ListParams) (Page, error) {
	limit := min(max(p.Limit, 1), 100)
	after, err := decodeCursor(p.Cursor)
	if err != nil {
		return Page{}, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+taskColumns+` FROM tasks
		WHERE owner_id = $1 AND ($2::text = '' OR (created_at, id) < ($3::timestamptz, $2::uuid))
		  AND ($5 = '' OR status = $5) AND ($6 = '' OR model = $6) AND ($7 = '' OR workload = $7)
		  AND ($8::timestamptz IS NULL OR created_at > $8) AND ($9::timestamptz IS NULL OR created_at < $9)
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, p.Owner, after.ID, after.At, limit+1, string(p.Status), p.Model, p.Workload,
		optionalTime(p.CreatedAfter), optionalTime(p.CreatedBefore))
	if err != nil {
		return Page{}, fmt.Errorf("tasks: list: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: list: %w", err)
	}
	for i := range list {
		s.guard.reveal(&list[i])
	}
	return page(list, limit), nil
}

// optionalTime is t as a query argument: NULL when zero.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// cursor is a position in a newest-first listing.
type cursor struct {
	At time.Time `json:"t"`
	ID string    `json:"i"`
}

func decodeCursor(c string) (cursor, error) {
	var after cursor
	if c == "" {
		return after, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || json.Unmarshal(raw, &after) != nil || uuid.Validate(after.ID) != nil {
		return cursor{}, ErrInvalidCursor
	}
	return after, nil
}

// page cuts a result fetched with limit+1 rows into a page and its cursor.
func page(list []Task, limit int) Page {
	p := Page{Tasks: list}
	if len(list) > limit {
		p.Tasks = list[:limit]
		last := p.Tasks[limit-1]
		raw, _ := json.Marshal(cursor{At: last.CreatedAt, ID: last.ID})
		p.NextCursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	if p.Tasks == nil {
		p.Tasks = []Task{}
	}
	return p
}

// taskColumns are the columns scanTask reads, in its order, from a query
// on tasks (unaliased).
const taskColumns = `id::text, owner_id, status, idempotency_key, model, attempts, reserved_micros,
	created_at, updated_at, finished_at, deadline_at, result, error, request, workload, cancel_requested,
	payload, output_sealed, redaction_policy, bodies_erased_at, route, prompt_version, max_attempts, call_timeout_ms, job_id, answer_sealed,
	` + costColumn

// costColumn reads what the task was charged from its settlement, the one
// place every final status's charge is kept (a canceled or failed task has
// no result to hold it): NULL until settled, and for a task released
// without charge.
const costColumn = `(SELECT u.cost_micros FROM usage_records u WHERE u.task_id = tasks.id) AS cost_micros`

// clientViewColumns are taskColumns for a task that is only shown to a
// client: its stored request reduced to the metadata, the one part of the
// request a client's view shows (Task.Request holds only that). Polls,
// waits, replayed POSTs and admissions would otherwise decode the whole
// stored prompt on every answer, at a cost that grows with its size.
var clientViewColumns = strings.Replace(taskColumns, " request,", " jsonb_build_object('metadata', request->'metadata') AS request,", 1)

func scanTask(r pgx.CollectableRow) (Task, error) { return scanTaskInto(r) }

func scanTaskInto(r pgx.CollectableRow, extra ...any) (Task, error) {
	var t Task
	var status string
	dest := []any{&t.ID, &t.OwnerID, &status, &t.IdempotencyKey, &t.Model, &t.Attempts, &t.ReservedMicros,
		&t.CreatedAt, &t.UpdatedAt, &t.FinishedAt, &t.DeadlineAt, &t.Result, &t.Error, &t.Request, &t.Workload, &t.CancelRequested,
		&t.payload, &t.outputSealed, &t.policy, &t.BodiesErasedAt, &t.Route, &t.PromptVersion, &t.maxAttempts, &t.callTimeoutMS, &t.jobID, &t.answerSealed,
		&t.CostMicros}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return Task{}, err
	}
	t.Status = Status(status)
	t.Metadata = t.Request.Metadata
	return t, nil
}
