package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

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
	return s.reader.search(ctx, f)
}

// search carries out Service.Search.
func (s *reader) search(ctx context.Context, f SearchFilter) (Page, error) {
	limit := min(max(f.Limit, 1), 100)
	after, err := decodeCursor(f.Cursor)
	if err != nil {
		return Page{}, err
	}
	if f.To.IsZero() {
		f.To = time.Now().Add(time.Hour)
	}
	q := searchSQL(f, s.guard.storedKey(f.Query), after, limit)
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
// the tasks_request_text index (the baseline migration, 000100). A whole request could
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
		// reservation is held, which has its own index (the baseline migration).
		where = append(where, "finished_at IS NULL",
			"tasks.id IN (SELECT task_id FROM budget_reservations WHERE state = 'held')",
			"tasks.status = "+b.arg(string(f.Status)))
	case StatusFailed, StatusCanceled:
		// Failed and canceled tasks, a small share of all, are marked for
		// their own index (the baseline migration).
		where = append(where, "ended_unsucceeded = "+b.arg(string(f.Status)))
	default:
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
	// The key a client sent, as stored, and the query as given: the
	// stored form itself ("h:" and its digest), as answers show it.
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
