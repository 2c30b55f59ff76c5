package server

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// headerReplayedFailure names the failed task whose failure answers a call
// without an Idempotency-Key that repeats it, within
// TOLLGATE_FAILURE_REPLAY_WINDOW_S of its end: no task was created and no
// provider called.
const headerReplayedFailure = "X-Tollgate-Replayed-Failure"

// replayedFailure answers a call that created.ReplayedFailure says
// repeats a task that failed moments ago: that task's failure, in the
// dialect's envelope with the status, type and code it was answered with,
// so that an SDK raises the same error. Every retry of the client's is
// answered so until the window closes, so the answer tells the client
// not to retry: its detail counts the task's attempts as all spent, which
// the window's calls have (tasks.Service.Create replays a retryable
// failure only then).
func replayedFailure(ctx context.Context, d *Deps, c echo.Context, created tasks.Created) error {
	t := created.Task
	setTaskHeaders(c, created)
	c.Response().Header().Set(headerReplayedFailure, t.ID)
	detail, _ := d.Tasks.FailureDetail(ctx, t.OwnerID, t.ID)
	detail.Attempts = max(detail.Attempts, detail.MaxAttempts)
	return &taskFailed{task: t, detail: detail}
}
