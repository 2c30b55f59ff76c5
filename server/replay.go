package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/tasks"
)

type replayRecord struct {
	TaskID         string           `json:"task_id"`
	OwnerID        string           `json:"owner_id"`
	IdempotencyKey string           `json:"idempotency_key"`
	Status         tasks.Status     `json:"status"`
	Request        tasks.Request    `json:"request"`
	CreatedAt      time.Time        `json:"created_at"`
	FinishedAt     *time.Time       `json:"finished_at"`
	Attempts       []replay.Attempt `json:"attempts"`
}

// getReplay: GET /v1/tasks/{id}/replay. Served from the database only; a
// replay never calls a model. The owner may read its records; support and
// admin may read any owner's, stating why in X-Reason. Every read is
// audited before the record is returned.
func getReplay(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		p := principalOf(c)
		var t tasks.Task
		var err error
		staff := p.Role == accounts.RoleSupport || p.Role == accounts.RoleAdmin
		if staff {
			t, err = d.Tasks.GetAny(ctx, c.Param("id"))
		} else {
			t, err = d.Tasks.Get(ctx, p.OwnerID, c.Param("id"))
		}
		if err != nil {
			return err
		}
		reason := c.Request().Header.Get("X-Reason")
		if t.OwnerID != p.OwnerID && len(reason) < 3 {
			return forbidden("Reading another owner's record needs an X-Reason header saying why; it is audited.")
		}
		attempts, err := d.Replays.Attempts(ctx, t.ID)
		if err != nil {
			return err
		}
		if err := d.Replays.Audit(ctx, replay.Access{
			TaskID: t.ID, OwnerID: t.OwnerID, ActorOwner: p.OwnerID, ActorKeyID: p.KeyID,
			ActorRole: string(p.Role), Reason: reason,
		}); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, replayRecord{
			TaskID: t.ID, OwnerID: t.OwnerID, IdempotencyKey: t.IdempotencyKey, Status: t.Status,
			Request: t.Request, CreatedAt: t.CreatedAt, FinishedAt: t.FinishedAt, Attempts: attempts,
		})
	}
}
