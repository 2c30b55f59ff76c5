package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// A dialect is one client API's wire format on a route that admits a
// task (OpenAI's chat completions, Responses and embeddings, Anthropic's
// Messages): it decodes a request into the provider-neutral task request
// and writes answers, streams and errors in its own shapes. admit runs
// what every dialect shares (the key, admission, waiting, replay), so a
// new dialect is a type of its own and a line in registerEndpoints; it
// touches no other dialect. C is the dialect's decoded call: what it
// needs from the request to answer it.
type dialect[C any] interface {
	errorDialect
	// decode reads the request into the dialect's call and what it asks
	// of admission; an error is answered in the dialect's envelope.
	decode(c echo.Context, d *Deps) (C, admission, error)
	// refused is an error of the admission under the dialect's field
	// names.
	refused(call C, err error) error
	// answer writes t, a task that ended with an answer (or, in the
	// background, the task as admitted).
	answer(c echo.Context, d *Deps, call C, t tasks.Task) error
	// streamLive runs created inline and relays the provider's stream.
	streamLive(c echo.Context, d *Deps, call C, created tasks.Created) error
	// streamStored writes t's stored answer as a stream: a replay, or
	// with admission.follows a task still running, followed to its end.
	streamStored(c echo.Context, d *Deps, call C, t tasks.Task) error
}

// errorDialect writes an error in a dialect's envelope, with its statuses
// and retry headers, so an SDK's error classes and retries behave as
// against the provider it imitates; it returns the status. The routes
// register theirs (registrar.add), and errorHandler writes every error
// of a route, its authentication's included, in it.
type errorDialect interface {
	writeError(c echo.Context, err error) int
}

// admission is what a call asks of admission, in terms every dialect
// shares.
type admission struct {
	req tasks.Request
	// stream: the answer goes as a stream of events.
	stream bool
	// background: answered at once, the task running on the durable queue
	// (Responses' background mode).
	background bool
	// follows: a stored stream starts at once and follows its task to its
	// end (Responses); otherwise a replayed stream waits for the answer.
	follows bool
	// canceledAnswers: a canceled task is answered (Responses' status
	// cancelled), not a failure.
	canceledAnswers bool
	// keyPrefix starts the key a call without an Idempotency-Key gets, so
	// that it is never taken for another's repeat.
	keyPrefix string
	// badKey is the refusal of an Idempotency-Key that is not 1-255
	// printable ASCII characters, in the dialect's words.
	badKey error
}

// key is the call's idempotency key: the client's, or one of its own; a
// key of the client's (keyed) makes retrying safe.
func (a admission) key(c echo.Context) (key string, keyed bool, err error) {
	key, keyed, err = optionalKey(c, a.keyPrefix)
	if err != nil && a.badKey != nil {
		return "", true, a.badKey
	}
	return key, keyed, err
}

// admit is the handler of every dialect's admitting route: decode, key,
// admission, then the answer, live, stored or waited for. A task that
// outlives the synchronous wait is a taskPending; one that failed is its
// failure, both in the dialect's envelope, as is a failure a call without
// a key repeats (replayedFailure).
func admit[C any](d *Deps, dl dialect[C]) echo.HandlerFunc {
	return func(c echo.Context) error {
		call, a, err := dl.decode(c, d)
		if err != nil {
			return err
		}
		key, keyed, err := a.key(c)
		if err != nil {
			return err
		}
		p := principalOf(c)
		ctx := c.Request().Context()
		live := a.stream && !a.background
		created, err := submit(ctx, d, p, tasks.Submission{OwnerID: p.OwnerID, Workload: p.Workload,
			IdempotencyKey: key, Unkeyed: !keyed, TraceID: traceIDOf(c), Request: a.req, Inline: live, Queue: a.background,
			Await: !a.background && !live})
		if err != nil {
			return dl.refused(call, err)
		}
		if created.ReplayedFailure {
			return replayedFailure(ctx, d, c, created)
		}
		setTaskHeaders(c, created)
		switch {
		case live && !created.Replayed:
			return dl.streamLive(c, d, call, created)
		case a.stream && a.follows:
			return dl.streamStored(c, d, call, created.Task)
		case a.background:
			return dl.answer(c, d, call, created.Task)
		}
		t, err := awaitAnswer(ctx, d, p.OwnerID, created)
		if err != nil {
			return err
		}
		switch {
		case t.Status == tasks.StatusSucceeded || (a.canceledAnswers && t.Status == tasks.StatusCanceled):
			if a.stream {
				return dl.streamStored(c, d, call, t)
			}
			return dl.answer(c, d, call, t)
		case t.Status.Final():
			return failedTask(ctx, d, p.OwnerID, t)
		}
		return &taskPending{taskID: t.ID, keyed: keyed}
	}
}

// registrar registers routes under a group with the dialect of their
// errors, which errorHandler looks up by route.
type registrar struct {
	g      *echo.Group
	prefix string
	speaks map[string]errorDialect
}

// add registers h for method and path with its middleware; dl, when not
// nil, is the dialect every error of the route is written in.
func (r registrar) add(method, path string, h echo.HandlerFunc, dl errorDialect, mw ...echo.MiddlewareFunc) {
	r.g.Add(method, path, h, mw...)
	if dl != nil {
		r.speaks[r.prefix+path] = dl
	}
}

// dialectOf is the dialect errors of c's route are written in; nil for
// Tollgate's own problem documents.
func dialectOf(c echo.Context, speaks map[string]errorDialect) errorDialect {
	if c.Path() == "" {
		return nil
	}
	return speaks[c.Path()]
}

// writeJSON answers v with status 200.
func writeJSON(c echo.Context, v any) error { return c.JSON(http.StatusOK, v) }

// errNoStream is a stream asked of a dialect that has none: a bug.
var errNoStream = errors.New("server: this dialect answers no stream")
