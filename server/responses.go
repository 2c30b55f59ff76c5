package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// OpenAI's Responses API. A response is a task: "resp_" and the task's
// id, reserved, classified, settled and recorded like any other. In the
// background it runs on the durable queue, so it survives the instance
// that admitted it; it is retrieved, cancelled and deleted through the
// task's own operations.

// oaiResponses is OpenAI's Responses dialect: POST /v1/responses. Its
// errors name the Responses API's fields (respField).
type oaiResponses struct{ oaiErrors }

func newOAIResponses() oaiResponses {
	return oaiResponses{oaiErrors{param: func(p string) string { return respField(p, nil) }}}
}

func (oaiResponses) decode(c echo.Context, d *Deps) (respCall, admission, error) {
	raw, err := readBody(c, d.MaxBodyBytes)
	if err != nil {
		return respCall{}, admission{}, err
	}
	call, err := decodeResponsesRequest(raw)
	if err != nil {
		return respCall{}, admission{}, err
	}
	if err := continueFrom(c.Request().Context(), d, principalOf(c).OwnerID, &call); err != nil {
		return respCall{}, admission{}, err
	}
	return admitResponse(call)
}

// admitResponse is call, its conversation complete, as the task request
// admission is asked for.
func admitResponse(call respCall) (respCall, admission, error) {
	call.req = call.req.Canonical()
	if err := call.req.Validate(); err != nil {
		return respCall{}, admission{}, respFields(err, call.origins)
	}
	return call, admission{req: call.req, stream: call.stream, background: call.background, follows: true,
		canceledAnswers: true, keyPrefix: "resp/"}, nil
}

func (oaiResponses) refused(call respCall, err error) error { return respFields(err, call.origins) }

// render is the response of t, read in a context of its own: the client
// may be gone and the answer is still written.
func (oaiResponses) render(c echo.Context, d *Deps, call respCall) func(tasks.Task) respObject {
	ctx := context.WithoutCancel(c.Request().Context())
	return func(t tasks.Task) respObject { return renderResponse(ctx, d, t, call.req) }
}

func (r oaiResponses) answer(c echo.Context, d *Deps, call respCall, t tasks.Task) error {
	if n := nativeAnswer(t); n != nil {
		return c.JSONBlob(http.StatusOK, n.Body)
	}
	return writeJSON(c, r.render(c, d, call)(t))
}

// nativeAnswer is the provider's own Response object of a succeeded task
// whose request was carried natively, nil for any other: a client that
// sent what only the provider understands gets the provider's answer as
// it came (its id the provider's; X-Tollgate-Task-Id names the task).
func nativeAnswer(t tasks.Task) *provider.NativeAnswer {
	if t.Status != tasks.StatusSucceeded || t.Result == nil {
		return nil
	}
	if n := t.Result.Native; n != nil && n.API == provider.APIOpenAIResponses && len(n.Body) > 0 {
		return n
	}
	return nil
}

func (r oaiResponses) streamLive(c echo.Context, d *Deps, call respCall, created tasks.Created) error {
	return streamLive(c, d, created, r.render(c, d, call))
}

func (r oaiResponses) streamStored(c echo.Context, d *Deps, call respCall, t tasks.Task) error {
	return streamStored(c, d, t, -1, r.render(c, d, call))
}

// renderResponse is the response of task t, created from req; a failed
// task's error reads its failure detail.
func renderResponse(ctx context.Context, d *Deps, t tasks.Task, req tasks.Request) respObject {
	var detail tasks.FailureDetail
	if t.Status == tasks.StatusFailed {
		detail, _ = d.Tasks.FailureDetail(ctx, t.OwnerID, t.ID)
	}
	return responseOf(t, req, detail)
}

// continueFrom opens call's messages with the conversation of the
// response it continues: that response's messages (without its
// instructions, which OpenAI does not carry over) and its answer, after
// call's own instructions. The response must be the caller's own (any
// other is not found), completed, and stored.
func continueFrom(ctx context.Context, d *Deps, owner string, call *respCall) error {
	if call.previous == "" {
		return nil
	}
	t, prev, err := d.Tasks.Conversation(ctx, owner, call.previous)
	switch {
	case errors.Is(err, tasks.ErrNotFound), errors.Is(err, tasks.ErrErased):
		return responseNotFound("previous_response_id")
	case err != nil:
		return err
	}
	if prev.Conversation != nil && prev.Conversation.Unstored {
		return fieldErr("previous_response_id", "names a response created with store: false, which cannot be continued")
	}
	if t.Status != tasks.StatusSucceeded || t.Result == nil {
		return fieldErr("previous_response_id", "names a response that has not completed")
	}
	history := prev.Messages
	if prev.Conversation != nil && prev.Conversation.Instructions && len(history) > 0 {
		history = history[1:]
	}
	answer := answerChoices(t.Result)[0].Message
	answer.Role = "assistant"
	n := 0
	if call.req.Conversation.Instructions {
		n = 1
	}
	msgs := make([]provider.Message, 0, len(call.req.Messages)+len(history)+1)
	msgs = append(append(append(msgs, call.req.Messages[:n]...), history...), answer)
	msgs = append(msgs, call.req.Messages[n:]...)
	origins := append([]string{}, call.origins[:n]...)
	for range len(history) + 1 {
		origins = append(origins, "previous_response_id")
	}
	call.req.Messages, call.origins = msgs, append(origins, call.origins[n:]...)
	return nil
}

// responseTask reads the caller's response named in the path with its
// request; an unknown id, another owner's and an erased one are all not
// found.
func responseTask(c echo.Context, d *Deps) (tasks.Task, tasks.Request, error) {
	id, ok := taskIDOfResponse(c.Param("id"))
	if !ok {
		return tasks.Task{}, tasks.Request{}, responseNotFound("")
	}
	t, req, err := d.Tasks.Conversation(c.Request().Context(), principalOf(c).OwnerID, id)
	if errors.Is(err, tasks.ErrNotFound) || errors.Is(err, tasks.ErrErased) {
		return tasks.Task{}, tasks.Request{}, responseNotFound("")
	}
	return t, req, err
}

// getResponseQuery reads GET /v1/responses/{id}'s query: stream and
// starting_after; include must be empty and include_obfuscation changes
// nothing (no padding is sent). Any other parameter is refused by name.
func getResponseQuery(q url.Values) (stream bool, after int, err error) {
	after = -1
	for name, vals := range q {
		v := vals[len(vals)-1]
		switch name {
		case "stream":
			if stream, err = strconv.ParseBool(v); err != nil {
				return false, 0, fieldErr("stream", "must be true or false")
			}
		case "starting_after":
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 0 {
				return false, 0, fieldErr("starting_after", "must be a non-negative whole number")
			}
			after = n
		case "include", "include[]":
			if v != "" {
				return false, 0, fieldErr("include", "must be empty: Tollgate answers no optional output fields")
			}
		case "include_obfuscation":
			if _, perr := strconv.ParseBool(v); perr != nil {
				return false, 0, fieldErr("include_obfuscation", "must be true or false")
			}
		default:
			return false, 0, fieldErr(name, "is not a parameter of this operation")
		}
	}
	return stream, after, nil
}

// getResponse: GET /v1/responses/{id}, as JSON or (stream=true) as the
// stored event stream from starting_after on.
func getResponse(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		stream, after, err := getResponseQuery(c.QueryParams())
		if err != nil {
			return err
		}
		// OpenAI's Go SDK asks for the stream in a JSON body
		// ({"stream": true}) rather than the query.
		raw, err := readBody(c, d.MaxBodyBytes)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			var body struct {
				Stream bool `json:"stream"`
			}
			if err := decodeBytes(raw, &body, scanStrict, ""); err != nil {
				return err
			}
			stream = stream || body.Stream
		}
		t, req, err := responseTask(c, d)
		if err != nil {
			return err
		}
		c.Response().Header().Set("X-Tollgate-Task-Id", t.ID)
		render := func(t tasks.Task) respObject {
			return renderResponse(context.WithoutCancel(c.Request().Context()), d, t, req)
		}
		if stream {
			return streamStored(c, d, t, after, render)
		}
		return c.JSON(http.StatusOK, render(t))
	}
}

// cancelResponse: POST /v1/responses/{id}/cancel. A queued response is
// cancelled at once; a running one when its call returns (settled for
// what the call spent), and it reads cancelled from now on. Cancelling a
// cancelled response answers it again; a finished one cannot be.
func cancelResponse(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, req, err := responseTask(c, d)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		c.Response().Header().Set("X-Tollgate-Task-Id", t.ID)
		if !t.Status.Final() {
			ct, err := d.Tasks.Cancel(ctx, t.OwnerID, t.ID)
			switch {
			case errors.Is(err, tasks.ErrFinished):
				// It finished meanwhile: read how.
				if ct, err = d.Tasks.Get(ctx, t.OwnerID, t.ID); err != nil {
					return err
				}
			case err != nil:
				return err
			}
			t = ct
		}
		if t.Status.Final() && t.Status != tasks.StatusCanceled {
			return badRequest("Only a queued or in-progress response can be cancelled; this one has finished.")
		}
		return c.JSON(http.StatusOK, renderResponse(ctx, d, t, req))
	}
}

// deleteResponse: DELETE /v1/responses/{id}. Erases the response's
// bodies as replay erasure does (a tombstone stays, with the metadata
// finance needs); the response is not found from then on.
func deleteResponse(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, _, err := responseTask(c, d)
		if err != nil {
			return err
		}
		if _, err := d.Tasks.Erase(c.Request().Context(), t.OwnerID, t.ID, actor(c)); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"id": responseID(t.ID), "object": "response.deleted", "deleted": true})
	}
}
