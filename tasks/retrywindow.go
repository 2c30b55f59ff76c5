package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Some clients retry a failed call by themselves, without an idempotency
// key and deaf to x-should-retry (the Vercel AI SDK, LangChain): each
// retry would be a new task, with Tollgate's own attempts again, so one
// failure upstream would become several. A request without a key whose
// request hash the owner's task failed on within
// Config.FailureReplayWindow is answered with that task's failure
// instead: no task is written, nothing reserved or charged, no provider
// called.
//
// Only what a client's retry cannot change is replayed (replaysFailure):
// the failures the API surfaces tell a client not to retry. Canceled
// tasks, refusals before admission (a budget, a rate limit, shedding) and
// Tollgate's own failures leave no failure to replay. A request with a key
// is answered by its key's task (Create), failed or not, and never here;
// a background request is answered at once and never retried on failure.
//
// Two identical requests that arrive together both run: the window opens
// only once a failure is recorded. A task's finished_at is the database's
// clock and the window's start this process's (Config.Now): a skew
// between the two moves the window by as much.

// recentFailure is the owner's latest failed task of a request within
// the window, and the provider calls the window's failed tasks of that
// request made together.
type recentFailure struct {
	task  Task
	spent int
}

// failureWindowOf is the time from which sub's failures are replayed:
// zero (none) for a keyed or background submission, or with no window.
func (s *intake) failureWindowOf(sub Submission) (since time.Time) {
	if !sub.Unkeyed || sub.Queue || s.cfg.FailureReplayWindow <= 0 {
		return time.Time{}
	}
	return s.cfg.Now().Add(-s.cfg.FailureReplayWindow)
}

// recentFailureSQL reads the latest failure and the calls spent. The
// partial index tasks_failed_requests (owner_id, request_hash, failed
// only) finds them: an index on finished_at or status would cost every
// succeeded finish its heap-only update.
var recentFailureSQL = `
	WITH recent AS (
		SELECT id, attempts, finished_at FROM tasks
		WHERE owner_id = $1 AND request_hash = $2 AND ended_unsucceeded = 'failed' AND finished_at > $3)
	SELECT ` + clientViewColumns + `, (SELECT sum(attempts) FROM recent)::int
	FROM tasks WHERE id = (SELECT id FROM recent ORDER BY finished_at DESC, id LIMIT 1)`

// queueRecentFailure queues the read of p's latest failure since
// p.failedSince into *into, left nil when there is none.
func (s *intake) queueRecentFailure(b *pgx.Batch, p lookupParams, into **recentFailure) {
	b.Queue(recentFailureSQL, p.owner, p.hash, p.failedSince).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recentFailure, error) {
			var f recentFailure
			var err error
			f.task, err = scanTaskInto(r, &f.spent)
			return f, err
		})
		if len(list) == 1 {
			*into = &list[0]
		}
		return err
	})
}

// replaysFailure decides whether a request identical to one that ended
// with f is answered with f, spent being the provider calls the window's
// failures of the request made and bound a task's attempt bound. It
// replays what the API surfaces tell a client never to retry: a rejection,
// a refusal, an empty account, a redirect, a possibly executed call, an
// unusable answer. A rate limit or an unavailable model may be retried
// while the window's calls are within the attempt bound (as x-should-retry
// says, see server's clientMayRetry), since a stream makes one attempt and
// leaves the rest to the client; past the bound it is replayed. Tollgate's
// own failure (application_failure) and codes unknown here are not.
func replaysFailure(f *Failure, spent, bound int) bool {
	if f == nil {
		return false
	}
	switch f.Code {
	case CodeModelIncompatible, CodeIncompatibleModelResponse, CodeModelQuotaExhausted,
		CodeProviderRedirected, CodePossiblyExecuted:
		return true
	case CodeModelRateLimited, CodeModelTemporarilyUnavailable:
		return spent >= bound
	}
	return false
}

// replayFailure answers a submission with r's failure when replaysFailure
// says so; ok is false when the submission is to be admitted.
func (s *intake) replayFailure(ctx context.Context, r *recentFailure) (c Created, ok bool) {
	if r == nil || !replaysFailure(r.task.Error, r.spent, s.cfg.maxAttemptsOf(r.task)) {
		return Created{}, false
	}
	s.cfg.Metrics.TaskSubmitted("failure_replayed")
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "request answered with a recent failure",
		slog.String("task_id", r.task.ID), slog.String("owner_id", r.task.OwnerID),
		slog.String("code", r.task.Error.Code), slog.Int("calls_spent", r.spent))
	return Created{Task: r.task, ReplayedFailure: true}, true
}
