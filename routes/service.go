package routes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
	"github.com/tollgate/tollgate/tasks"
)

// Service answers route calls.
type Service struct {
	pool    *pgxpool.Pool
	tasks   *tasks.Service
	catalog *catalog.Catalog
	routes  map[string]*Route
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time
	// Format turns a validated value into the answer's data. It is the
	// last step of post-processing; a failure there is ours
	// (application_failure). Tests replace it to prove that mapping.
	Format func(r *Route, v any) (any, error)
}

// Deps are what a route service is built from. Log and Now may be nil:
// no log, the system clock.
type Deps struct {
	Pool    *pgxpool.Pool
	Tasks   *tasks.Service
	Catalog *catalog.Catalog
	Routes  map[string]*Route // compiled (Compile)
	Metrics *metrics.Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// New returns a route service for the compiled routes.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{pool: d.Pool, tasks: d.Tasks, catalog: d.Catalog, routes: d.Routes, metrics: d.Metrics, log: d.Log, now: d.Now,
		Format: func(_ *Route, v any) (any, error) { return v, nil }}
}

// Errors.
var (
	ErrNotFound = errors.New("routes: no such route")
)

// Call is one call of a route.
type Call struct {
	Route          string
	Input          map[string]any
	User           string // the end user the per-user guards count
	OwnerID        string
	Workload       string
	IdempotencyKey string
	TraceID        string
	// Messages continue the conversation after the route's rendered
	// prompt (see Route.Continue): a tool loop's assistant tool calls,
	// tool results and further user turns.
	Messages []provider.Message
}

// Fallback says which guard substituted an answer, and why.
type Fallback struct {
	Guard  string `json:"guard"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// Answer is what a route call returns with on_failure: fallback, and on
// success in either mode.
type Answer struct {
	Data     any
	Fallback *Fallback
	// Message, when the model asked for tool calls instead of answering,
	// is its assistant message: the client runs the calls and sends this
	// message and the tools' results back as the continuation. Data is
	// nil then.
	Message *provider.Message
	// FinishReason is the model's, when a task answered.
	FinishReason string
	TaskID       string
	Replayed     bool
	// RateLimit is the rate limits' decision on the call's task, for the
	// x-ratelimit headers; nil when no limit applied or none was made.
	RateLimit *limits.Decision
}

// Failure is a route call that failed with on_failure: error: a stable
// code, and whether and when retrying may help.
type Failure struct {
	Guard, Reason string
	Code          string // tasks.Code*, "budget_exceeded", "rate_limited"
	Retryable     bool
	TaskID        string
}

func (f *Failure) Error() string { return "routes: " + f.Code + " (" + f.Reason + ")" }

// Answer runs a route call: input validation (an *InputError before
// anything is spent), the budget guard (per-user rate limit and daily cap,
// the budget reservation, the provider key's breaker), the call as a task
// raced against the route's deadline, and the output guard. With
// on_failure: fallback every failure becomes an Answer with Fallback set;
// with on_failure: error it is a *Failure.
func (s *Service) Answer(ctx context.Context, c Call) (Answer, error) {
	rc, req, err := s.prepare(c)
	if err != nil {
		return Answer{}, err
	}
	created, refused, err := s.submit(ctx, rc, req)
	if err != nil {
		return Answer{}, err
	}
	if refused != nil {
		return s.fail(ctx, rc, *refused)
	}
	// The call guard: the whole call, retries included, raced against the
	// route's deadline (each attempt also has it as its own limit).
	attempts := rc.route.MaxRetries + 1
	t, err := s.tasks.Wait(ctx, tasks.WaitParams{Created: &created, For: time.Duration(attempts)*rc.route.Deadline + time.Second, ReturnIfBlocked: true})
	if err != nil {
		return Answer{}, err
	}
	if !t.Status.Final() {
		// Nobody will read a late answer: cancel, so it is not paid for.
		_, _ = s.tasks.Cancel(context.WithoutCancel(ctx), c.OwnerID, t.ID)
	}
	if f := taskFailure(t); f != nil {
		return s.fail(ctx, rc, *f)
	}
	return s.deliver(ctx, rc, created, t)
}

// routeCall is one call of a route on its way: the route, the call and
// the key of its last good answer.
type routeCall struct {
	route     *Route
	call      Call
	inputHash []byte
}

// failed is how a call failed, decided before it is answered (fail): the
// guard that refused it, why, a detail for the fallback, and the task
// when one ran.
type failed struct {
	guard, reason, detail string
	task                  *tasks.Task
}

// prepare validates a call and builds its task request: an *InputError
// for bad input, ErrNotFound for an unknown route.
func (s *Service) prepare(c Call) (routeCall, tasks.Request, error) {
	r := s.routes[c.Route]
	if r == nil {
		return routeCall{}, tasks.Request{}, ErrNotFound
	}
	system, user, clean, err := r.Prompt(c.Input)
	if err != nil {
		return routeCall{}, tasks.Request{}, err
	}
	if err := r.Continue(c.Messages); err != nil {
		return routeCall{}, tasks.Request{}, err
	}
	return routeCall{route: r, call: c, inputHash: hashInput(r.Name, clean, c.Messages)}, r.request(system, user, c.Messages), nil
}

// submit runs the budget guard and creates the call's task; a refusal is
// returned as a failure, not an error.
func (s *Service) submit(ctx context.Context, rc routeCall, req tasks.Request) (tasks.Created, *failed, error) {
	r, c := rc.route, rc.call
	// A retry of a call already made skips the guards: it costs nothing.
	found, err := s.tasks.Exists(ctx, c.OwnerID, c.IdempotencyKey)
	if err != nil {
		return tasks.Created{}, nil, err
	}
	if !found {
		reason, err := s.budgetGuard(ctx, r, c)
		if err != nil {
			return tasks.Created{}, nil, err
		}
		if reason != "" {
			return tasks.Created{}, &failed{guard: GuardBudget, reason: reason}, nil
		}
	}
	created, err := s.tasks.Create(ctx, tasks.Submission{
		OwnerID: c.OwnerID, Workload: c.Workload, IdempotencyKey: c.IdempotencyKey, TraceID: c.TraceID, Request: req,
		Route: r.Name, PromptVersion: r.PromptVersion, MaxAttempts: r.MaxRetries + 1, CallTimeout: r.Deadline, Await: true,
	})
	switch {
	case errors.Is(err, budget.ErrInsufficient):
		return tasks.Created{}, &failed{guard: GuardBudget, reason: ReasonBudget, detail: "the budget cannot cover this call"}, nil
	case errors.Is(err, tasks.ErrOverloaded):
		return tasks.Created{}, &failed{guard: GuardBudget, reason: ReasonOverloaded, detail: "the service is behind and refused new calls for now"}, nil
	case err != nil:
		return tasks.Created{}, nil, err
	}
	return created, nil, nil
}

// taskFailure is how a waited-for task failed the call guard, nil when it
// succeeded: it did not finish within the deadline, or it failed.
func taskFailure(t tasks.Task) *failed {
	if !t.Status.Final() {
		reason := ReasonTimeout
		if t.Error != nil {
			reason = reasonFor(t.Error)
		}
		return &failed{guard: GuardCall, reason: reason, detail: "the call did not finish within the route's deadline", task: &t}
	}
	if t.Status == tasks.StatusSucceeded {
		return nil
	}
	guard, reason := GuardCall, ReasonProviderError
	if t.Error != nil {
		reason = reasonFor(t.Error)
		if t.Error.Code == tasks.CodeIncompatibleModelResponse {
			guard = GuardOutput
		}
	}
	return &failed{guard: guard, reason: reason, task: &t}
}

// deliver puts a succeeded task's answer through the output guard and
// answers with it: tool calls, or the formatted value, remembered as the
// input's last good answer.
func (s *Service) deliver(ctx context.Context, rc routeCall, created tasks.Created, t tasks.Task) (Answer, error) {
	r := rc.route
	vd := r.judge(t.Result)
	if vd.Err != nil {
		return s.fail(ctx, rc, failed{guard: GuardOutput, reason: vd.Reason, detail: vd.Err.Error(), task: withoutFailure(t)})
	}
	if vd.Message != nil {
		return Answer{Message: vd.Message, FinishReason: t.Result.FinishReason, TaskID: t.ID, Replayed: created.Replayed, RateLimit: created.RateLimit}, nil
	}
	data, ferr := s.Format(r, vd.Value)
	if ferr != nil {
		s.log.Error("route post-processing failed", slog.String("route", r.Name), slog.String("task_id", t.ID), slog.String("error", ferr.Error()))
		return s.fail(ctx, rc, failed{guard: GuardOutput, reason: ReasonApplicationErr, task: withoutFailure(t)})
	}
	if err := s.remember(ctx, r, rc.call.OwnerID, rc.inputHash, t.ID); err != nil {
		s.log.Warn("route answer cache failed", slog.String("route", r.Name), slog.String("error", err.Error()))
	}
	return Answer{Data: data, FinishReason: t.Result.FinishReason, TaskID: t.ID, Replayed: created.Replayed, RateLimit: created.RateLimit}, nil
}

// reasonFor maps a task's failure to a fallback reason.
func reasonFor(f *tasks.Failure) string {
	switch {
	case f.Code == tasks.CodeIncompatibleModelResponse:
		return ReasonSchema
	case f.Code == tasks.CodeModelQuotaExhausted || f.Class == string(provider.ClassExhausted):
		return ReasonCircuitOpen
	case f.Code == tasks.CodeModelRateLimited:
		return ReasonRateLimited
	case f.Code == tasks.CodeApplicationFailure:
		return ReasonApplicationErr
	case f.Moderated:
		return ReasonModeration
	}
	return ReasonProviderError
}

// budgetGuard runs the checks made before any call: the provider key's
// breaker, then the per-user limits (counted now: a call that then times
// out still counts).
func (s *Service) budgetGuard(ctx context.Context, r *Route, c Call) (string, error) {
	m, _, err := s.catalog.Resolve(r.Model)
	if err != nil {
		return "", err
	}
	st, err := gate.NewStore(s.pool).Get(ctx, m.Provider)
	if err != nil {
		return "", err
	}
	if st.Mode == gate.Open {
		return ReasonCircuitOpen, nil
	}
	// The end user is counted by its digest: rate_windows never holds it.
	ok, err := s.admit(ctx, r, c.OwnerID, s.tasks.Fields().Apply(redact.FieldRouteUser, c.User))
	if err != nil || !ok {
		return ReasonRateLimited, err
	}
	return "", nil
}

// admit counts one call against the user's window and day, both or
// neither: a refused call is not counted.
func (s *Service) admit(ctx context.Context, r *Route, owner, user string) (bool, error) {
	now := s.now().UTC()
	var quotas []limits.Quota
	if r.RateRequests > 0 {
		quotas = append(quotas, limits.Quota{Scope: limits.RouteScope(r.Name, "window", user),
			Start: now.Truncate(r.RateWindow), Span: r.RateWindow, Limit: int64(r.RateRequests)})
	}
	if r.DailyCalls > 0 {
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		quotas = append(quotas, limits.Quota{Scope: limits.RouteScope(r.Name, "day", user),
			Start: day, Span: 24 * time.Hour, Limit: int64(r.DailyCalls)})
	}
	ok, err := limits.NewStore(s.pool).Take(ctx, owner, quotas)
	if err != nil {
		return false, fmt.Errorf("routes: admit: %w", err)
	}
	return ok, nil
}

// answerCacheSize bounds the remembered answers per route.
const answerCacheSize = 1000

func (s *Service) remember(ctx context.Context, r *Route, owner string, inputHash []byte, taskID string) error {
	_, err := s.pool.Exec(ctx, `
		WITH up AS (
			INSERT INTO route_answers (route, owner_id, input_hash, task_id) VALUES ($1, $2, $3, $4)
			ON CONFLICT (route, owner_id, input_hash) DO UPDATE SET task_id = EXCLUDED.task_id, created_at = now()
		)
		DELETE FROM route_answers WHERE route = $1 AND created_at < (
			SELECT created_at FROM route_answers WHERE route = $1 ORDER BY created_at DESC OFFSET $5 LIMIT 1)`,
		r.Name, owner, inputHash, taskID, answerCacheSize)
	return err
}

// lastAnswer is the last good answer for this input, if any survives.
func (s *Service) lastAnswer(ctx context.Context, r *Route, owner string, inputHash []byte) (any, bool) {
	var taskID string
	err := s.pool.QueryRow(ctx, `SELECT task_id::text FROM route_answers WHERE route = $1 AND owner_id = $2 AND input_hash = $3`,
		r.Name, owner, inputHash).Scan(&taskID)
	if err != nil {
		return nil, false
	}
	t, err := s.tasks.Get(ctx, owner, taskID)
	if err != nil || t.Result == nil || t.Result.Output == "" {
		return nil, false
	}
	v, _, err := r.Output(t.Result.Output)
	return v, err == nil
}

// fail answers a failed call as the route says: a same-shape fallback
// (the last good answer for this input, else the configured value), or a
// *Failure.
func (s *Service) fail(ctx context.Context, rc routeCall, fl failed) (Answer, error) {
	r, t, detail := rc.route, fl.task, fl.detail
	taskID := ""
	if t != nil {
		taskID = t.ID
	}
	if r.OnFailure == "error" {
		f := failureOf(fl.guard, fl.reason, taskID)
		if t != nil && t.Error != nil && (t.Status == tasks.StatusFailed || t.Error.Code == tasks.CodeProviderRedirected) {
			// The task's own classified failure is the most precise code;
			// a task waiting behind a breaker a redirect opened says so,
			// not that the account is out of quota.
			f.Code, f.Retryable = t.Error.Code, t.Error.Retryable
		}
		return Answer{}, f
	}
	s.metrics.Fallback(r.Name, fl.guard, fl.reason)
	data := r.Fallback
	if v, ok := s.lastAnswer(ctx, r, rc.call.OwnerID, rc.inputHash); ok {
		data = v
		if detail == "" {
			detail = "the last good answer for this input"
		}
	}
	if detail == "" {
		detail = "the route's configured fallback"
	}
	return Answer{Data: data, TaskID: taskID, Fallback: &Fallback{Guard: fl.guard, Reason: fl.reason, Detail: detail}}, nil
}

func failureOf(guard, reason, taskID string) *Failure {
	f := &Failure{Guard: guard, Reason: reason, TaskID: taskID}
	switch reason {
	case ReasonRateLimited:
		f.Code, f.Retryable = "rate_limited", true
		if guard == GuardCall {
			f.Code = tasks.CodeModelRateLimited
		}
	case ReasonBudget:
		f.Code = "budget_exceeded"
	case ReasonOverloaded:
		f.Code, f.Retryable = "overloaded", true
	case ReasonCircuitOpen:
		f.Code = tasks.CodeModelQuotaExhausted
	case ReasonTimeout, ReasonProviderError:
		f.Code, f.Retryable = tasks.CodeModelTemporarilyUnavailable, true
	case ReasonSchema, ReasonEmpty:
		f.Code = tasks.CodeIncompatibleModelResponse
	case ReasonModeration:
		f.Code = tasks.CodeModelIncompatible
	default:
		f.Code = tasks.CodeApplicationFailure
	}
	return f
}

// withoutFailure is a succeeded task whose answer the route refused: the
// failure is the route's (output guard), not the task's.
func withoutFailure(t tasks.Task) *tasks.Task {
	t.Error = nil
	return &t
}

// hashInput keys the last good answers: the route, its input and the
// continuation, so a fallback is never an answer to another conversation.
func hashInput(route string, clean map[string]any, continuation []provider.Message) []byte {
	b, _ := json.Marshal(clean) // map keys sorted: a canonical form
	h := sha256.New()
	h.Write([]byte(route + "\x00"))
	h.Write(b)
	if len(continuation) > 0 {
		m, _ := json.Marshal(continuation)
		h.Write([]byte{0})
		h.Write(m)
	}
	return h.Sum(nil)
}

// Submission turns a route call into an asynchronous task submission, for
// POST /v1/tasks {"route": ..., "input": ...}: the same prompt, model and
// bounds as a synchronous call. It returns an *InputError for bad input
// and ErrNotFound for an unknown route.
func (s *Service) Submission(c Call) (tasks.Submission, error) {
	r := s.routes[c.Route]
	if r == nil {
		return tasks.Submission{}, ErrNotFound
	}
	system, user, _, err := r.Prompt(c.Input)
	if err != nil {
		return tasks.Submission{}, err
	}
	if err := r.Continue(c.Messages); err != nil {
		return tasks.Submission{}, err
	}
	return tasks.Submission{
		OwnerID: c.OwnerID, Workload: c.Workload, IdempotencyKey: c.IdempotencyKey, TraceID: c.TraceID,
		Request: r.request(system, user, c.Messages),
		Route:   r.Name, PromptVersion: r.PromptVersion, MaxAttempts: r.MaxRetries + 1, CallTimeout: r.Deadline,
	}, nil
}

// request is the task request of one call of r: its prompt filled in,
// the call's continuation after it, and everything the route fixes. The
// whole of it is the task's request, so the idempotency hash covers the
// continuation too.
func (r *Route) request(system, user string, continuation []provider.Message) tasks.Request {
	// JSON mode only when the route asks for no schema of its own: the
	// two are one request's alternatives.
	req := tasks.Request{JSONMode: r.OutputJSON && r.chat.ResponseFormat == nil}
	req.Model = r.Model
	if r.chat.Reasoning {
		req.MaxCompletionTokens = r.MaxTokens
	} else {
		req.MaxTokens = r.MaxTokens
	}
	req.Messages = make([]provider.Message, 0, 2+len(continuation))
	req.Messages = append(req.Messages, provider.Message{Role: "system", Content: provider.Text(system)}, provider.Message{Role: "user", Content: provider.Text(user)})
	req.Messages = append(req.Messages, continuation...)
	// Copies: a request is the task's to rewrite (redaction), the route's
	// definition is shared by every call.
	req.Tools, req.ToolChoice, req.ParallelToolCalls = slices.Clone(r.chat.Tools), r.chat.ToolChoice, r.chat.ParallelToolCalls
	req.ResponseFormat = r.chat.ResponseFormat
	req.Params = r.chat.Params
	req.Stop = slices.Clone(r.chat.Params.Stop)
	return req
}
