package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// The OpenAI-compatible surface: existing SDK code points its base URL at
// Tollgate and keeps working, and every call becomes a Tollgate task with
// its reservation, classified failures and replay record.

// chatCompletions: POST /v1/chat/completions.
func chatCompletions(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in oaiRequest
		if err := decodeLenient(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		req, err := in.task()
		if err != nil {
			return err
		}
		key, keyed, err := optionalKey(c, "chatcmpl/")
		if err != nil {
			return err
		}
		p := principalOf(c)
		ctx := c.Request().Context()
		created, err := submit(ctx, d, p, tasks.Submission{OwnerID: p.OwnerID, Workload: p.Workload,
			IdempotencyKey: key, TraceID: traceIDOf(c), Request: req, Inline: in.Stream, Await: !in.Stream})
		if err != nil {
			return err
		}
		setTaskHeaders(c, created)
		if in.Stream && !created.Replayed {
			return streamCompletion(c, d, created, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		}
		t, err := awaitAnswer(ctx, d, p.OwnerID, created)
		if err != nil {
			return err
		}
		switch {
		case t.Status == tasks.StatusSucceeded && in.Stream:
			// A replayed streaming request gets the stored answer as a stream.
			sse := newSSE(c)
			sse.replay(t)
			return sse.finish(t, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		case t.Status == tasks.StatusSucceeded:
			return c.JSON(http.StatusOK, completionOf(t))
		case t.Status.Final():
			return failedTask(ctx, d, p.OwnerID, t)
		}
		return &taskPending{taskID: t.ID, keyed: keyed}
	}
}

// setTaskHeaders names the task that answers a call on a provider's
// surface, and whether the answer is a repeat's.
func setTaskHeaders(c echo.Context, created tasks.Created) {
	h := c.Response().Header()
	h.Set("X-Tollgate-Task-Id", created.Task.ID)
	h.Set("Idempotent-Replayed", strconv.FormatBool(created.Replayed))
	setRateLimitHeaders(h, created.RateLimit)
}

// awaitAnswer waits, up to the synchronous wait, for a task created on a
// provider's surface to end. A task blocked behind a paused key or an open
// breaker is answered now with the reason, and cancelled so that it does
// not run (and charge) later for a client that has gone: the error is the
// cancelled task's failure.
func awaitAnswer(ctx context.Context, d *Deps, owner string, created tasks.Created) (tasks.Task, error) {
	t, err := d.Tasks.Wait(ctx, tasks.WaitParams{Created: &created, For: d.SyncWait, ReturnIfBlocked: true})
	if err != nil {
		return tasks.Task{}, err
	}
	if !t.Status.Final() && t.Error != nil {
		if ct, cerr := d.Tasks.Cancel(context.WithoutCancel(ctx), owner, t.ID); cerr == nil {
			ct.Error = t.Error
			return tasks.Task{}, failedTask(context.WithoutCancel(ctx), d, owner, ct)
		}
	}
	return t, nil
}

// optionalKey is the request's Idempotency-Key on a surface where it is
// optional, as on OpenAI's: without one, the call gets a key of its own
// (prefix and a UUID), so that it is never taken for another's repeat.
func optionalKey(c echo.Context, prefix string) (key string, keyed bool, err error) {
	key = c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		return prefix + uuid.NewString(), false, nil
	}
	if !tasks.ValidIdempotencyKey(key) {
		return "", true, &apiError{status: http.StatusBadRequest, code: "idempotency_key_missing",
			detail: "An Idempotency-Key must be 1-255 printable ASCII characters."}
	}
	return key, true, nil
}

// decodeLenient decodes a JSON body accepting unknown fields: OpenAI adds
// fields all the time, and SDKs send them.
func decodeLenient(c echo.Context, limit int64, dst any) error {
	raw, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBytes(raw, dst, scanLenient, "")
}

// modelsList: GET /v1/models in OpenAI's shape: the configured model names.
func modelsList(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		}
		out := struct {
			Object string  `json:"object"`
			Data   []model `json:"data"`
		}{Object: "list", Data: []model{}}
		if d.Catalog != nil {
			for _, m := range d.Catalog.Models {
				out.Data = append(out.Data, model{ID: m.Name, Object: "model", OwnedBy: m.Provider})
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}
