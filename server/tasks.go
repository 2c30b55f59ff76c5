package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/routes"
	"github.com/tollgate/tollgate/tasks"
)

type taskList struct {
	Data       []tasks.Task `json:"data"`
	NextCursor *string      `json:"next_cursor"`
}

// taskInput is the body of POST /v1/tasks.
type taskInput struct {
	tasks.Request
	// A route may run as a task: {"route": "draft-reply", "input": {...}}.
	Route string         `json:"route"`
	Input map[string]any `json:"input"`
}

// createTask: POST /v1/tasks.
func createTask(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		if !tasks.ValidIdempotencyKey(key) {
			return &apiError{status: http.StatusBadRequest, code: "idempotency_key_missing",
				detail: "Send an Idempotency-Key header of 1-255 printable ASCII characters."}
		}
		wait, waitSet := preferWait(c.Request().Header.Get("Prefer"), d.MaxWait)
		var body taskInput
		if err := decodeJSON(c, d.MaxBodyBytes, &body); err != nil {
			return err
		}
		if body.Conversation != nil {
			// Set by POST /v1/responses only.
			return badRequest(`Unknown field "conversation".`, tasks.FieldError{Field: "conversation", Message: "unknown field"})
		}
		if body.Embedding != nil {
			return fieldErr("embedding", "is not a field of a task; POST /v1/embeddings makes embeddings")
		}
		p := principalOf(c)
		ctx := c.Request().Context()
		sub := tasks.Submission{OwnerID: p.OwnerID, Workload: p.Workload, IdempotencyKey: key, TraceID: traceIDOf(c), Request: body.Request.Canonical()}
		if body.Route != "" || body.Input != nil {
			var err error
			if sub, err = routeTask(d, body.Request, routes.Call{Route: body.Route, Input: body.Input, OwnerID: p.OwnerID,
				Workload: p.Workload, IdempotencyKey: key, TraceID: traceIDOf(c)}); err != nil {
				return err
			}
		}
		sub.Await = wait > 0
		created, err := submit(ctx, d, p, sub)
		if err != nil {
			return err
		}
		t := created.Task
		if wait > 0 {
			if t, err = d.Tasks.Wait(ctx, tasks.WaitParams{Created: &created, For: wait}); err != nil {
				return err
			}
		}
		h := c.Response().Header()
		h.Set("Location", "/v1/tasks/"+t.ID)
		h.Set("Idempotent-Replayed", strconv.FormatBool(created.Replayed))
		setRateLimitHeaders(h, created.RateLimit)
		if waitSet {
			h.Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
		}
		if t.Status.Final() {
			return c.JSON(http.StatusOK, t)
		}
		return c.JSON(http.StatusAccepted, t)
	}
}

// preferWait reads RFC 7240 "wait=N" from a Prefer header. A preference
// it cannot honour (another name, or a wait that is not a whole number of
// seconds, such as wait=abc or wait=-1) is ignored, as RFC 7240 section 2
// asks of a server; the first valid wait counts. N is capped at max before
// any arithmetic, so a huge N waits max, never a negative or overflowed
// time.
func preferWait(h string, max time.Duration) (d time.Duration, set bool) {
	for _, pref := range strings.FieldsFunc(h, func(r rune) bool { return r == ',' || r == ';' }) {
		name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) || (err == nil && n > uint64(max/time.Second)):
			return max, true
		case err != nil:
			continue
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// getTask: GET /v1/tasks/{id}, a long poll with Prefer: wait=N. Another
// owner's task is reported as not found.
func getTask(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		wait, waitSet := preferWait(c.Request().Header.Get("Prefer"), d.MaxWait)
		ctx, owner := c.Request().Context(), principalOf(c).OwnerID
		var t tasks.Task
		var err error
		if wait > 0 {
			t, err = d.Tasks.Wait(ctx, tasks.WaitParams{Owner: owner, ID: c.Param("id"), For: wait})
		} else {
			t, err = d.Tasks.Get(ctx, owner, c.Param("id"))
		}
		if err != nil {
			return err
		}
		if waitSet {
			c.Response().Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
		}
		return c.JSON(http.StatusOK, t)
	}
}

// listTasks: GET /v1/tasks?cursor=&limit=.
func listTasks(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		params, err := listParams(c.QueryParams())
		if err != nil {
			return err
		}
		params.Owner = principalOf(c).OwnerID
		page, err := d.Tasks.List(c.Request().Context(), params)
		if err != nil {
			return err
		}
		out := taskList{Data: page.Tasks}
		if page.NextCursor != "" {
			out.NextCursor = &page.NextCursor
		}
		return c.JSON(http.StatusOK, out)
	}
}

// listParams reads GET /v1/tasks's query: the page and the filters. An
// unknown parameter is refused by name, never ignored: a filter the
// service does not know would otherwise answer an unfiltered list.
func listParams(q url.Values) (tasks.ListParams, error) {
	p := tasks.ListParams{Limit: 20, Cursor: q.Get("cursor"), Model: q.Get("model"), Workload: q.Get("workload")}
	for name := range q {
		switch name {
		case "limit", "cursor", "status", "model", "workload", "created_after", "created_before":
		default:
			return p, badRequest(fmt.Sprintf("Unknown query parameter %q.", name),
				tasks.FieldError{Field: name, Message: "unknown query parameter; GET /v1/tasks takes limit, cursor, status, model, workload, created_after and created_before"})
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return p, badRequest("limit must be a whole number from 1 to 100.",
				tasks.FieldError{Field: "limit", Message: "must be 1-100"})
		}
		p.Limit = n
	}
	if s := q.Get("status"); s != "" {
		switch st := tasks.Status(s); st {
		case tasks.StatusQueued, tasks.StatusRunning, tasks.StatusSucceeded, tasks.StatusFailed, tasks.StatusCanceled:
			p.Status = st
		default:
			return p, badRequest("status must be queued, running, succeeded, failed or canceled.",
				tasks.FieldError{Field: "status", Message: "must be queued, running, succeeded, failed or canceled"})
		}
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"created_after", &p.CreatedAfter}, {"created_before", &p.CreatedBefore}} {
		if s := q.Get(b.name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return p, badRequest(b.name+" must be an RFC 3339 time, such as 2026-01-02T15:04:05Z.",
					tasks.FieldError{Field: b.name, Message: "must be an RFC 3339 time"})
			}
			*b.dst = t
		}
	}
	return p, nil
}

// cancelTask: POST /v1/tasks/{id}/cancel. 200 with the canceled task, or
// 202 while a running call finishes (the task is canceled when it returns).
func cancelTask(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, err := d.Tasks.Cancel(c.Request().Context(), principalOf(c).OwnerID, c.Param("id"))
		if err != nil {
			return err
		}
		if t.Status.Final() {
			return c.JSON(http.StatusOK, t)
		}
		return c.JSON(http.StatusAccepted, t)
	}
}
