package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/redact"
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
	Route          *string          `json:"route"`
	PromptVersion  *string          `json:"prompt_version"`
	Attempts       []replay.Attempt `json:"attempts"`
	// CostMicros is what the task was charged, whatever its status (null
	// until settled, or when released); Error why it failed, or why it
	// waits ("Waiting: ...") while queued.
	CostMicros *int64         `json:"cost_micros"`
	Error      *tasks.Failure `json:"error"`
}

func isStaff(p accounts.Principal) bool {
	return p.Role == accounts.RoleSupport || p.Role == accounts.RoleAdmin
}

// recordTask finds the task a replay request is about: any owner's for
// support and admin, the caller's own otherwise (another owner's task is
// not found, not forbidden, so its existence is not disclosed).
func recordTask(c echo.Context, d *Deps) (tasks.Task, error) {
	p := principalOf(c)
	owner := p.OwnerID
	if isStaff(p) {
		owner = ""
	}
	return d.Tasks.Record(c.Request().Context(), owner, c.Param("id"))
}

// getReplay: GET /v1/tasks/{id}/replay. Served from the database only; a
// replay never calls a model. Anyone but the owner must say why in
// X-Reason, and their read is audited before the record is returned. An
// erased record answers 410 with its tombstone.
func getReplay(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		p := principalOf(c)
		t, err := recordTask(c, d)
		if err != nil {
			return err
		}
		if t.BodiesErasedAt != nil {
			ts, err := d.Tasks.TombstoneOf(ctx, t.ID)
			if err != nil {
				return err
			}
			return &apiError{status: http.StatusGone, code: "gone", detail: "The record's bodies were erased; its tombstone says when and by whom.", tombstone: ts}
		}
		reason := c.Request().Header.Get("X-Reason")
		var attempts []replay.Attempt
		if t.OwnerID != p.OwnerID {
			if len(reason) < 3 || len(reason) > 500 {
				return forbidden("Reading another owner's record needs an X-Reason header (3-500 characters) saying why; it is audited.")
			}
			// The audit row and the read in one statement: never shown
			// unaudited.
			attempts, err = d.Replays.AuditedAttempts(ctx, replay.Access{
				TaskID: t.ID, OwnerID: t.OwnerID, ActorOwner: p.OwnerID, ActorKeyID: p.KeyID,
				ActorRole: string(p.Role), Reason: d.Tasks.Fields().Apply(redact.FieldReason, reason),
			})
		} else {
			attempts, err = d.Replays.Attempts(ctx, t.ID)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, replayRecord{
			TaskID: t.ID, OwnerID: t.OwnerID, IdempotencyKey: t.IdempotencyKey, Status: t.Status,
			Request: t.Request, CreatedAt: t.CreatedAt, FinishedAt: t.FinishedAt, Attempts: attempts,
			Route: t.Route, PromptVersion: t.PromptVersion, CostMicros: t.CostMicros, Error: t.Error,
		})
	}
}

// deleteReplay: DELETE /v1/tasks/{id}/replay (owner or admin). Erases the
// task's bodies now and keeps a tombstone; metadata finance needs stays.
func deleteReplay(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		owner := p.OwnerID
		if p.Role == accounts.RoleAdmin {
			owner = ""
		}
		ts, err := d.Tasks.Erase(c.Request().Context(), owner, c.Param("id"), actor(c))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, ts)
	}
}

// rerunTask: POST /v1/tasks/{id}/rerun. A NEW task repeating the request,
// charged to the owner's budget and the caller's workload (its cap holds)
// and linked to the original; disabled unless TOLLGATE_ALLOW_RERUN=on.
func rerunTask(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !d.AllowRerun {
			return forbidden("Reruns are disabled on this service (TOLLGATE_ALLOW_RERUN=on enables them).")
		}
		key := c.Request().Header.Get("Idempotency-Key")
		if !tasks.ValidIdempotencyKey(key) {
			return &apiError{status: http.StatusBadRequest, code: "idempotency_key_missing",
				detail: "Send an Idempotency-Key header: the rerun's own key is derived from it and the original task."}
		}
		p := principalOf(c)
		owner := p.OwnerID
		if p.Role == accounts.RoleAdmin {
			owner = ""
		}
		created, err := d.Tasks.Rerun(c.Request().Context(), tasks.RerunParams{
			Owner: owner, Workload: p.Workload, TaskID: c.Param("id"), Key: key, TraceID: traceIDOf(c)})
		if errors.Is(err, tasks.ErrErased) {
			return &apiError{status: http.StatusGone, code: "gone", detail: "The original request was erased; it cannot be rerun."}
		}
		if err != nil {
			return err
		}
		c.Response().Header().Set("Location", "/v1/tasks/"+created.Task.ID)
		c.Response().Header().Set("Idempotent-Replayed", strconv.FormatBool(created.Replayed))
		setRateLimitHeaders(c.Response().Header(), created.RateLimit)
		return c.JSON(http.StatusAccepted, created.Task)
	}
}

type replaySummary struct {
	TaskID         string       `json:"task_id"`
	OwnerID        string       `json:"owner_id"`
	IdempotencyKey string       `json:"idempotency_key"`
	Model          string       `json:"model"`
	Status         tasks.Status `json:"status"`
	Attempts       int          `json:"attempts"`
	CreatedAt      time.Time    `json:"created_at"`
	FinishedAt     *time.Time   `json:"finished_at"`
	Erased         bool         `json:"erased"`
	CostMicros     *int64       `json:"cost_micros"`
}

type replayList struct {
	Data       []replaySummary `json:"data"`
	NextCursor *string         `json:"next_cursor"`
}

// searchReplays: GET /v1/replays?owner=&from=&to=&model=&status=&q=.
// Support and admin search every owner; others their own. Listing shows
// no bodies, so it is not audited; opening a record is.
func searchReplays(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		f := tasks.SearchFilter{Model: c.QueryParam("model"), Query: c.QueryParam("q"), Cursor: c.QueryParam("cursor"), Limit: 50}
		f.OwnerID = c.QueryParam("owner")
		if !isStaff(p) {
			if f.OwnerID != "" && f.OwnerID != p.OwnerID {
				return forbidden("Only support and admin keys may search another owner's records.")
			}
			f.OwnerID = p.OwnerID
		}
		var err error
		if f.From, err = parseTime(c.QueryParam("from"), "from", time.Unix(0, 0).UTC()); err != nil {
			return err
		}
		if f.To, err = parseTime(c.QueryParam("to"), "to", time.Now().UTC().Add(time.Hour)); err != nil {
			return err
		}
		if s := c.QueryParam("status"); s != "" {
			switch st := tasks.Status(s); st {
			case tasks.StatusQueued, tasks.StatusRunning, tasks.StatusSucceeded, tasks.StatusFailed, tasks.StatusCanceled:
				f.Status = st
			default:
				return badRequest("status must be queued, running, succeeded, failed or canceled.", tasks.FieldError{Field: "status", Message: "unknown status"})
			}
		}
		if l := c.QueryParam("limit"); l != "" {
			if f.Limit, err = strconv.Atoi(l); err != nil || f.Limit < 1 || f.Limit > 100 {
				return badRequest("limit must be a whole number from 1 to 100.", tasks.FieldError{Field: "limit", Message: "must be 1-100"})
			}
		}
		page, err := d.Tasks.Search(c.Request().Context(), f)
		if err != nil {
			return err
		}
		out := replayList{Data: make([]replaySummary, len(page.Tasks))}
		for i, t := range page.Tasks {
			out.Data[i] = replaySummary{TaskID: t.ID, OwnerID: t.OwnerID, IdempotencyKey: t.IdempotencyKey, Model: t.Model,
				Status: t.Status, Attempts: t.Attempts, CreatedAt: t.CreatedAt, FinishedAt: t.FinishedAt, Erased: t.BodiesErasedAt != nil,
				CostMicros: t.CostMicros}
		}
		if page.NextCursor != "" {
			out.NextCursor = &page.NextCursor
		}
		return c.JSON(http.StatusOK, out)
	}
}

type auditList struct {
	Data       []replay.AuditEntry `json:"data"`
	NextCursor *string             `json:"next_cursor"`
}

// getAudit: GET /v1/audit?task_id=&owner=&cursor= (admin).
func getAudit(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		f := replay.AuditFilter{TaskID: c.QueryParam("task_id"), OwnerID: c.QueryParam("owner"), Limit: 100}
		if cur := c.QueryParam("cursor"); cur != "" {
			n, err := strconv.ParseInt(cur, 10, 64)
			if err != nil || n < 1 {
				return badRequest("The cursor is not one this service issued.", tasks.FieldError{Field: "cursor", Message: "not a cursor this service issued"})
			}
			f.Before = n
		}
		list, more, err := d.Replays.AuditLog(c.Request().Context(), f)
		if err != nil {
			return err
		}
		out := auditList{Data: list}
		if more {
			next := strconv.FormatInt(list[len(list)-1].ID, 10)
			out.NextCursor = &next
		}
		return c.JSON(http.StatusOK, out)
	}
}

// getPrivacy: GET /v1/owners/{owner}/privacy (admin, or the owner's keys).
func getPrivacy(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		if c.Param("owner") != p.OwnerID && p.Role != accounts.RoleAdmin {
			return forbidden("Only admin keys may read another owner's privacy settings.")
		}
		pr, err := d.Accounts.GetPrivacy(c.Request().Context(), c.Param("owner"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, pr)
	}
}

type privacyInput struct {
	RedactionPolicy       string `json:"redaction_policy"`
	BodyRetentionDays     int    `json:"body_retention_days"`
	MetadataRetentionDays int    `json:"metadata_retention_days"`
}

// putPrivacy: PUT /v1/owners/{owner}/privacy (admin). New tasks follow
// the new policy; stored records keep the one they were written under.
func putPrivacy(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		var in privacyInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		pr, err := d.Accounts.SetPrivacy(c.Request().Context(), accounts.Privacy{OwnerID: c.Param("owner"),
			RedactionPolicy: in.RedactionPolicy, BodyRetentionDays: in.BodyRetentionDays, MetadataRetentionDays: in.MetadataRetentionDays})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, pr)
	}
}
