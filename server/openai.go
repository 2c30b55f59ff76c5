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

// oaiChat is OpenAI's chat completions dialect: POST /v1/chat/completions.
type oaiChat struct{ oaiErrors }

// oaiChatCall is what answering a chat completion needs of its request.
type oaiChatCall struct{ withUsage bool }

func (oaiChat) decode(c echo.Context, d *Deps) (oaiChatCall, admission, error) {
	raw, err := readBody(c, d.MaxBodyBytes)
	if err != nil {
		return oaiChatCall{}, admission{}, err
	}
	return decodeChatCompletion(raw)
}

// decodeChatCompletion is a chat completions body as a call and its
// admission.
func decodeChatCompletion(raw []byte) (oaiChatCall, admission, error) {
	var in oaiRequest
	if err := decodeBytes(raw, &in, scanLenient, ""); err != nil {
		return oaiChatCall{}, admission{}, err
	}
	req, err := in.task()
	if err != nil {
		return oaiChatCall{}, admission{}, err
	}
	call := oaiChatCall{withUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage}
	return call, admission{req: req, stream: in.Stream, keyPrefix: "chatcmpl/"}, nil
}

func (oaiChat) refused(_ oaiChatCall, err error) error { return err }

func (oaiChat) answer(c echo.Context, _ *Deps, _ oaiChatCall, t tasks.Task) error {
	return writeJSON(c, completionOf(t))
}

func (oaiChat) streamLive(c echo.Context, d *Deps, call oaiChatCall, created tasks.Created) error {
	return streamCompletion(c, d, created, call.withUsage)
}

// streamStored gives a replayed streaming request the stored answer as a
// stream.
func (oaiChat) streamStored(c echo.Context, _ *Deps, call oaiChatCall, t tasks.Task) error {
	sse := newSSE(c)
	sse.replay(t)
	return sse.finish(t, call.withUsage)
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
