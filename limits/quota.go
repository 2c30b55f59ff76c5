package limits

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Quota is at most Limit requests in one window of a scope that is not
// an owner's limit: Span long from Start.
type Quota struct {
	Scope string // RouteScope; never a workload's name
	Start time.Time
	Span  time.Duration
	Limit int64 // at least 1
}

// RouteScope is the scope of a route's guard on one end user: kind
// "window" (the route's rate limit) or "day" (its daily cap), user the end
// user's digest (never the user itself). It holds ':', which no
// workload's name does, so its windows never meet an owner's limits.
func RouteScope(route, kind, user string) string {
	return "route:" + route + ":" + kind + ":" + user
}

// Take counts one request on every quota's window of owner, all of them
// or none, in one transaction: it returns false, counting nothing, when
// any window is at its limit. Each window's row lock orders the takes of
// every instance, so none is counted past a limit. It returns ErrInvalid
// for a quota whose scope could be a workload, whose limit or span is not
// positive, or that repeats another's scope.
func (s *Store) Take(ctx context.Context, owner string, quotas []Quota) (bool, error) {
	if len(quotas) == 0 {
		return true, nil
	}
	scopes, starts, spans := make([]string, len(quotas)), make([]time.Time, len(quotas)), make([]time.Duration, len(quotas))
	limit := make(map[string]int64, len(quotas))
	for i, q := range quotas {
		if _, dup := limit[q.Scope]; dup || !strings.Contains(q.Scope, ":") || q.Limit < 1 || q.Span <= 0 {
			return false, fmt.Errorf("%w: quota %q", ErrInvalid, q.Scope)
		}
		scopes[i], starts[i], spans[i], limit[q.Scope] = q.Scope, q.Start, q.Span, q.Limit
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Rows are locked in scope order, so that two takes never wait
		// for one another in a cycle.
		rows, err := tx.Query(ctx, `
			INSERT INTO rate_windows AS w (owner_id, workload, window_start, span, requests)
			SELECT $1, q.scope, q.start, q.span, 1 FROM unnest($2::text[], $3::timestamptz[], $4::interval[]) AS q (scope, start, span)
			ORDER BY q.scope
			ON CONFLICT (owner_id, workload, window_start) DO UPDATE SET requests = w.requests + 1
			RETURNING w.workload, w.requests`, owner, scopes, starts, spans)
		if err != nil {
			return err
		}
		counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
		if err != nil {
			return err
		}
		if !fits(counts, limit) {
			return errOver // rolls the counts back
		}
		return nil
	})
	if errors.Is(err, errOver) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("limits: take: %w", err)
	}
	return true, nil
}

// count is one window's requests after a take, its own included.
type count struct {
	Scope    string
	Requests int64
}

// errOver rolls back a take that does not fit.
var errOver = errors.New("limits: over a quota")

// fits says whether every window's count, a take's own request included,
// is within its scope's limit.
func fits(counts []count, limit map[string]int64) bool {
	for _, c := range counts {
		if c.Requests > limit[c.Scope] {
			return false
		}
	}
	return true
}
