package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/replay"
)

// ErrErased is returned for a task whose bodies were erased (by retention
// or on request); Tombstone says when and by whom.
var ErrErased = errors.New("tasks: bodies erased")

// Tombstone records an erasure.
type Tombstone struct {
	ErasedAt time.Time `json:"erased_at"`
	ErasedBy string    `json:"erased_by"`
	Reason   string    `json:"reason"` // "deleted" or "retention"
}

// eraseTx erases a task's bodies (stored request, sealed request and
// output, replay response texts) and keeps the metadata finance and
// support need: ids, model, status, usage, costs, timings, classes.
func eraseTx(ctx context.Context, tx pgx.Tx, ids []string, by, reason string) (int64, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE tasks SET request = jsonb_build_object('messages', '[]'::jsonb, 'erased', true),
		       payload = NULL, output_sealed = NULL, answer_sealed = NULL,
		       bodies_erased_at = now(), bodies_erased_by = $2, bodies_erased_reason = $3
		WHERE id = ANY($1) AND bodies_erased_at IS NULL`, ids, by, reason)
	if err != nil {
		return 0, err
	}
	// A kept answer of a finished task is a leftover; it goes too.
	if _, err := tx.Exec(ctx, `DELETE FROM task_kept_answers WHERE task_id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), replay.EraseTx(ctx, tx, ids)
}

// Erase erases the bodies of the owner's task now ("" owner: any owner's,
// for admins), leaving a tombstone naming who asked. It returns
// ErrNotFound, or ErrErased with the existing tombstone when already
// erased.
func (s *Service) Erase(ctx context.Context, owner, id, by string) (Tombstone, error) {
	if uuid.Validate(id) != nil {
		return Tombstone{}, ErrNotFound
	}
	var ts Tombstone
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if owner != "" && t.OwnerID != owner {
			return ErrNotFound
		}
		if !t.Status.Final() {
			return fmt.Errorf("%w: the task is still running", ErrNotFinished)
		}
		if _, err := eraseTx(ctx, tx, []string{id}, by, "deleted"); err != nil {
			return err
		}
		ts, err = tombstoneTx(ctx, tx, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotFinished) {
		return Tombstone{}, fmt.Errorf("tasks: erase: %w", err)
	}
	return ts, err
}

// ErrNotFinished is returned for an operation that needs a finished task.
var ErrNotFinished = errors.New("tasks: task not finished")

// TombstoneOf returns the task's tombstone, or nil when its bodies are
// intact.
func (s *Service) TombstoneOf(ctx context.Context, id string) (*Tombstone, error) {
	var ts Tombstone
	var at *time.Time
	var by, reason *string
	err := s.pool.QueryRow(ctx, `SELECT bodies_erased_at, bodies_erased_by, bodies_erased_reason FROM tasks WHERE id = $1`, id).
		Scan(&at, &by, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: tombstone: %w", err)
	}
	if at == nil {
		return nil, nil
	}
	ts.ErasedAt, ts.ErasedBy, ts.Reason = *at, deref(by), deref(reason)
	return &ts, nil
}

func tombstoneTx(ctx context.Context, tx pgx.Tx, id string) (Tombstone, error) {
	var ts Tombstone
	err := tx.QueryRow(ctx, `SELECT bodies_erased_at, bodies_erased_by, bodies_erased_reason FROM tasks WHERE id = $1`, id).
		Scan(&ts.ErasedAt, &ts.ErasedBy, &ts.Reason)
	return ts, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PurgeBodies erases the bodies of finished tasks older than their owner's
// body retention, as of now, in batches of batch rows, each batch its own
// short transaction (SKIP LOCKED, so it never waits on or blocks live
// work). Metadata stays. It returns how many tasks it erased.
func (s *Service) PurgeBodies(ctx context.Context, now time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		var n int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT t.id::text FROM tasks t JOIN owners o ON o.id = t.owner_id
				WHERE t.bodies_erased_at IS NULL AND t.finished_at IS NOT NULL
				  AND t.finished_at < $1::timestamptz - make_interval(days => o.body_retention_days)
				ORDER BY t.created_at
				LIMIT $2
				FOR UPDATE OF t SKIP LOCKED`, now, batch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(ids) == 0 {
				return err
			}
			n, err = eraseTx(ctx, tx, ids, "system", "retention")
			return err
		})
		if err != nil {
			return total, fmt.Errorf("tasks: purge: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// PurgeArgs is the periodic River job that applies body retention. River
// enqueues periodic jobs from its elected leader only, so one instance
// purges at a time however many run.
type PurgeArgs struct{}

// Kind names the job kind in river_job.
func (PurgeArgs) Kind() string { return "tollgate_purge_bodies" }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	svc *Service
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	n, err := w.svc.PurgeBodies(ctx, w.svc.cfg.Now(), 1000)
	if n > 0 {
		w.svc.cfg.Logger.Info("retention purged task bodies", slog.Int64("tasks", n))
	}
	return err
}

// SearchFilter selects tasks for support's record search.
type SearchFilter struct {
	OwnerID string // "" for every owner (support and admin only)
	From    time.Time
	To      time.Time
	Model   string
	Status  Status
	// Query matches a task id, an idempotency key, or words of the stored
	// (redacted) request within its first SearchPrefixChars characters.
	Query  string
	Cursor string
	Limit  int
}

// Search finds tasks for support, newest first, with the same cursor as
// List. Its SQL holds only the conditions of the filters given, each in a
// form an index serves (a catch-all "$n = ” OR ..." hides every index from
// the planner), and it is planned for the values at hand, never from a
// cached generic plan: the right plan for a rare word is not the right one
// for a common word.
func (s *Service) Search(ctx context.Context, f SearchFilter) (Page, error) {
	limit := min(max(f.Limit, 1), 100)
	after, err := decodeCursor(f.Cursor)
	if err != nil {
		return Page{}, err
	}
	if f.To.IsZero() {
		f.To = time.Now().Add(time.Hour)
	}
	q := searchSQL(f, s.StoredKey(f.Query), after, limit)
	rows, err := s.pool.Query(ctx, q.sql, append([]any{pgx.QueryExecModeExec}, q.args...)...)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: search: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return Page{}, fmt.Errorf("tasks: search: %w", err)
	}
	return page(list, limit), nil
}

// sqlBuilder collects a statement's conditions and their arguments.
type sqlBuilder struct {
	sql  string
	args []any
}

// arg adds v and returns its placeholder.
func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return fmt.Sprintf("$%d", len(b.args))
}

// searchDocument is what support's word search matches: the first
// SearchPrefixChars characters of the stored request, the expression of
// the tasks_request_text index (migration 000128). A whole request could
// pass to_tsvector's 1 MiB limit and fail its INSERT.
const searchDocument = "to_tsvector('simple', left(request::text, 65536))"

// SearchPrefixChars is how many characters of a stored request (as JSON
// text) the word search covers; searchDocument spells it out for the
// index to match.
const SearchPrefixChars = 65536

// searchSQL is Search's statement for f; key is f.Query as an idempotency
// key is stored (StoredKey).
func searchSQL(f SearchFilter, key string, after cursor, limit int) sqlBuilder {
	var b sqlBuilder
	where := []string{"created_at >= " + b.arg(f.From), "created_at < " + b.arg(f.To)}
	if f.OwnerID != "" {
		where = append(where, "owner_id = "+b.arg(f.OwnerID))
	}
	if f.Model != "" {
		where = append(where, "model = "+b.arg(f.Model))
	}
	switch f.Status {
	case "":
	case StatusQueued, StatusRunning:
		// Unfinished tasks, a small share of all, are those whose
		// reservation is held, which has its own index (000114).
		where = append(where, "finished_at IS NULL",
			"tasks.id IN (SELECT task_id FROM budget_reservations WHERE state = 'held')",
			statusExpr+" = "+b.arg(string(f.Status)))
	case StatusFailed, StatusCanceled:
		// Failed and canceled tasks, a small share of all, are marked for
		// their own index (000114).
		where = append(where, "ended_unsucceeded = "+b.arg(string(f.Status)))
	default:
		// A finished task's shown status is its stored one.
		where = append(where, "tasks.status = "+b.arg(string(f.Status)))
	}
	if after.ID != "" {
		where = append(where, fmt.Sprintf("(created_at, id) < (%s::timestamptz, %s::uuid)", b.arg(after.At), b.arg(after.ID)))
	}
	cond := strings.Join(where, " AND ")
	order := ` ORDER BY created_at DESC, id DESC LIMIT ` + b.arg(limit+1)
	if f.Query == "" {
		b.sql = `SELECT ` + taskColumns + ` FROM tasks WHERE ` + cond + order
		return b
	}
	// A task id, an idempotency key (looked up owner by owner in the
	// unique index, so no index on the key alone is needed) or words of the
	// stored request. Each is its own arm with every filter, so that each
	// is planned on its own: the words' arm, newest first with its own
	// limit, reads the GIN index for a rare word and walks the newest tasks
	// for a common one, stopping at a page.
	qa := b.arg(f.Query) + "::text"
	var arms []string
	if uuid.Validate(f.Query) == nil {
		arms = append(arms, "SELECT id FROM tasks WHERE "+cond+" AND id = "+b.arg(f.Query)+"::uuid")
	}
	// The key as stored, and as given for tasks stored before keys were
	// digested.
	owners := "SELECT o.id, k FROM owners o, unnest(ARRAY[" + b.arg(key) + "::text, " + qa + "]) k"
	if f.OwnerID != "" {
		owners += " WHERE o.id = " + b.arg(f.OwnerID)
	}
	arms = append(arms,
		"SELECT id FROM tasks WHERE "+cond+" AND (owner_id, idempotency_key) IN ("+owners+")",
		"(SELECT id FROM tasks WHERE "+cond+" AND "+searchDocument+" @@ plainto_tsquery('simple', "+qa+")"+order+")")
	b.sql = `SELECT ` + taskColumns + ` FROM tasks WHERE id IN (` + strings.Join(arms, " UNION ") + `)` + order
	return b
}
