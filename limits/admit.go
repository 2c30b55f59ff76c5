package limits

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Charge is one admission counted on its owner's windows: one request and
// its estimated tokens.
type Charge struct {
	TaskID   string
	Workload string // the API key's workload, "" for none
	Tokens   int64  // the reservation's estimate
}

// Window is one limited scope's count in the admission's minute, the
// admission's own charge included.
type Window struct {
	Workload          string // "" for the owner's own limit
	RequestsPerMinute *int64
	TokensPerMinute   *int64
	Requests, Tokens  int64
}

// Windows receives the counts QueueAdmit's statement returns.
type Windows struct {
	List []Window
}

// codeRateLimited aborts a strict admission statement over a limit.
const codeRateLimited = "TG429"

// ErrBatchOver: a strict admission statement found a limit exceeded and
// aborted the transaction.
var ErrBatchOver = errors.New("limits: a limit is exceeded")

// QueueAdmit queues on b the statement that counts charges, all of owner,
// on every limited scope they fall under (the owner's, and each one's
// workload's) in the minute window of at, and remembers each charge's
// tokens for settlement to correct. It first folds into each window the
// corrections settlements recorded for it since (actual tokens minus
// estimate, the count never going below zero). Scopes without a limit are not
// counted. The counts, the charges' own included, fill out when b's
// results are read; Decide says whether they fit. The caller rolls back
// what does not fit. When strict, a count over its limit aborts the
// transaction instead (the pipeline's COMMIT is then skipped), and b's
// results return ErrBatchOver.
func QueueAdmit(b *pgx.Batch, owner string, at time.Time, charges []Charge, strict bool, out *Windows) {
	ids, workloads, tokens := make([]string, len(charges)), make([]string, len(charges)), make([]int64, len(charges))
	for i, c := range charges {
		ids[i], workloads[i], tokens[i] = c.TaskID, c.Workload, c.Tokens
	}
	// Counts saturate at 9e18, never overflow: a tokens-unlimited scope
	// counts every estimate, however large.
	// The counter rows are locked in workload order ('' first), so that
	// two admissions never wait for one another in a cycle.
	b.Queue(`
		WITH a AS (
			SELECT * FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS a (task_id, workload, tokens)
		), scoped AS (
			SELECT a.task_id, s.workload, a.tokens FROM a, LATERAL (SELECT '' UNION SELECT a.workload) AS s (workload)
		), lim AS (
			SELECT l.workload, l.requests_per_minute, l.tokens_per_minute, count(*) AS n, LEAST(sum(s.tokens), 9e18)::bigint AS tokens
			FROM rate_limits l JOIN scoped s ON s.workload = l.workload
			WHERE l.owner_id = $1 AND (l.requests_per_minute IS NOT NULL OR l.tokens_per_minute IS NOT NULL)
			GROUP BY l.workload, l.requests_per_minute, l.tokens_per_minute
		), corr AS (
			DELETE FROM rate_corrections c USING lim
			WHERE c.owner_id = $1 AND c.window_start = $5 AND c.workload = lim.workload
			RETURNING c.workload, c.tokens
		), owed AS (
			SELECT workload, sum(tokens) AS tokens FROM corr GROUP BY workload
		), w AS (
			INSERT INTO rate_windows AS w (owner_id, workload, window_start, span, requests, tokens)
			SELECT $1, workload, $5, interval '1 minute', n, tokens FROM lim ORDER BY workload
			ON CONFLICT (owner_id, workload, window_start)
			DO UPDATE SET requests = w.requests + EXCLUDED.requests,
			              tokens = LEAST(GREATEST(w.tokens + COALESCE((SELECT o.tokens FROM owed o WHERE o.workload = w.workload), 0), 0)
			                             + EXCLUDED.tokens, 9e18)::bigint
			RETURNING w.workload, w.requests, w.tokens
		), c AS (
			INSERT INTO rate_charges (task_id, owner_id, workload, window_start, tokens)
			SELECT a.task_id, $1, a.workload, $5, a.tokens FROM a WHERE EXISTS (SELECT 1 FROM lim)
		)
		SELECT lim.workload, lim.requests_per_minute, lim.tokens_per_minute, w.requests, w.tokens,
		       CASE WHEN $6 AND (w.requests > lim.requests_per_minute OR w.tokens > lim.tokens_per_minute)
		            THEN tollgate_abort('`+codeRateLimited+`', 'limits: rate limited') END
		FROM lim JOIN w USING (workload) ORDER BY lim.workload`,
		owner, ids, workloads, tokens, WindowOf(at), strict,
	).Query(func(rows pgx.Rows) error {
		out.List = out.List[:0]
		for rows.Next() {
			var w Window
			var abort *int64
			if err := rows.Scan(&w.Workload, &w.RequestsPerMinute, &w.TokensPerMinute, &w.Requests, &w.Tokens, &abort); err != nil {
				return err
			}
			out.List = append(out.List, w)
		}
		err := rows.Err()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == codeRateLimited {
			return ErrBatchOver
		}
		if err != nil {
			return fmt.Errorf("limits: admit: %w", err)
		}
		return nil
	})
}

// Kind is which limit an admission exceeded, named as OpenAI names it.
type Kind string

// Kinds of limit.
const (
	KindRequests Kind = "requests"
	KindTokens   Kind = "tokens"
)

// State is a limit's state after an admission, for the x-ratelimit
// headers: the limit, what is left of it in the window, and when the
// window ends.
type State struct {
	Limit, Remaining int64
	Reset            time.Duration
}

// Decision is Decide's answer for one admission.
type Decision struct {
	Allowed bool
	// When refused: the limit exceeded, the scope that has it ("" for
	// the owner's) and how long until the next window.
	Exceeded   Kind
	Workload   string
	RetryAfter time.Duration
	// The tightest requests and tokens limits that apply; nil when none.
	Requests, Tokens *State
}

// Decide says whether one admission counted in windows (its own request
// and tokens included) fits every limit at at. A refused admission is
// rolled back by its caller, so what remains is reported without it.
func Decide(windows []Window, tokens int64, at time.Time) Decision {
	reset := WindowOf(at).Add(time.Minute).Sub(at)
	d := Decision{Allowed: true}
	tightest := func(s **State, limit *int64, used int64) {
		if limit == nil {
			return
		}
		st := State{Limit: *limit, Remaining: max(*limit-used, 0), Reset: reset}
		if *s == nil || st.Remaining < (*s).Remaining {
			*s = &st
		}
	}
	for _, w := range windows {
		if d.Allowed && w.RequestsPerMinute != nil && w.Requests > *w.RequestsPerMinute {
			d.Allowed, d.Exceeded, d.Workload = false, KindRequests, w.Workload
		}
		if d.Allowed && w.TokensPerMinute != nil && w.Tokens > *w.TokensPerMinute {
			d.Allowed, d.Exceeded, d.Workload = false, KindTokens, w.Workload
		}
	}
	for _, w := range windows {
		requests, used := w.Requests, w.Tokens
		if !d.Allowed {
			requests, used = requests-1, used-tokens
		}
		tightest(&d.Requests, w.RequestsPerMinute, requests)
		tightest(&d.Tokens, w.TokensPerMinute, used)
	}
	if !d.Allowed {
		d.RetryAfter = max((reset+time.Second-1)/time.Second*time.Second, time.Second)
	}
	return d
}
