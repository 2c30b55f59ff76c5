package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/gate"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/redact"
)

// Created is what Create returns.
type Created struct {
	Task     Task
	Replayed bool // an earlier submission with the same key and request
	// ReplayedFailure: Task is the failed task of an identical request
	// without a key, answered again instead of called again
	// (retrywindow.go); nothing was written or reserved.
	ReplayedFailure bool
	// RateLimit is the rate limits' decision on the admission, for the
	// x-ratelimit headers; nil when no limit applies (or on a replay).
	RateLimit *limits.Decision
	jobID     int64
	watch     *watch // Submission.Await's subscription, for Wait
}

// Submission is one POST of a task.
type Submission struct {
	OwnerID        string
	Workload       string // the API key's workload, "" for none
	IdempotencyKey string
	TraceID        string
	Request        Request
	RerunOf        string // the task this one repeats, for reruns
	// Unkeyed: the client sent no idempotency key, and IdempotencyKey is
	// the caller's own: a repeat of a request that failed moments ago is
	// answered with that failure (retrywindow.go).
	Unkeyed bool
	// Inline: the caller runs the task itself (RunInline) to stream it; the
	// River job is scheduled after the call's deadline, as a safety net.
	Inline bool
	// Queue: the first attempt takes the durable queue, never runs on
	// arrival. A background response is answered at once and must read
	// queued until a worker takes it, as OpenAI's does; it then runs on
	// whichever instance takes it, so it outlives the admitting one.
	Queue bool
	// Await: the caller waits for the task's end with Wait
	// (WaitParams.Created) as soon as Create returns, as synchronous
	// calls do. Create then listens for the task before admitting it.
	Await bool
	// For route calls: the route and its prompt version (recorded for
	// replay), and per-task bounds on attempts and on each call.
	Route         string
	PromptVersion string
	MaxAttempts   int
	CallTimeout   time.Duration
}

// Create submits a task under the owner's idempotency key. Task row,
// reservation and job commit in one transaction. A retry of the same key
// and request returns the existing task with Replayed set and changes
// nothing. It returns ErrIdempotencyKeyReused when the key names a task with
// a different request, budget.ErrInsufficient when a budget cannot cover
// the reservation (no task is created and the key stays free), a
// *RateLimitedError (ErrRateLimited) when a rate limit of the owner or its
// workload has no room this minute (nothing is written either), an
// *OverloadError (ErrOverloaded) when it sheds the task (shed.go; nothing is
// written either), and a *ValidationError for an invalid request. An
// Unkeyed submission identical to one that failed moments ago returns that
// failed task with ReplayedFailure set, nothing written (retrywindow.go).
//
// Create decides and the admitter writes: the submission becomes a plan
// (planFor), the plan an admission (prepare), and the admitter commits it,
// alone or with the owner's other admissions (admitter.go).
func (s *Service) Create(ctx context.Context, sub Submission) (created Created, err error) {
	return s.intake.create(ctx, sub)
}

// create carries out Service.Create.
func (s *intake) create(ctx context.Context, sub Submission) (created Created, err error) {
	p, err := s.planFor(sub)
	if err != nil {
		return Created{}, err
	}
	// A retry is answered from one round trip, before any redaction,
	// sealing or transaction: retries are frequent and must stay cheap. The
	// same round trip reads the owner's redaction policy for a new task. A
	// key not found here may still be taken by a concurrent request by the
	// time the insert runs; the unique constraint decides that race, and
	// the admitter answers errKeyTaken. It also reads the gate of the
	// model's provider key when the task may run on arrival (claimArrival),
	// and whether the owner's budget has no room for the reservation at
	// all: such a request is refused before it is redacted and sealed,
	// which costs most for the largest requests.
	look := s.lookupOf(p)
	look.room = p.amount
	look.failedSince = s.failureWindowOf(sub)
	if !sub.Inline && s.mayRunOnArrival() {
		look.gateOf = p.model.Provider
	}
	f, err := s.lookup(ctx, look)
	if err != nil {
		return Created{}, fmt.Errorf("tasks: create: %w", err)
	}
	if f.task != nil {
		return s.replayed(*f.task, f.sameRequest)
	}
	if c, ok := s.replayFailure(ctx, f.failed); ok {
		return c, nil
	}
	if f.noRoom {
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return Created{}, budget.ErrInsufficient
	}
	done, err := s.shed.begin()
	if err != nil {
		s.cfg.Metrics.TaskSubmitted("overloaded")
		return Created{}, err
	}
	defer done()
	a, err := s.prepare(ctx, p, f.policy)
	if err != nil {
		return Created{}, err
	}
	w := s.awaitFor(a)
	if w != nil {
		// Handed over with the task, or stopped if there is none.
		defer func() {
			if created.watch != w {
				w.stop()
			}
		}()
	}
	arrival, err := s.arriveOrQueue(a, p.model, f.gate == gate.Closed)
	if err != nil {
		s.cfg.Metrics.TaskSubmitted("overloaded")
		return Created{}, err
	}
	err = s.admitter.admit(ctx, a)
	if arrival != nil {
		if err == nil {
			go s.runner.runOnArrival(a, arrival)
		} else {
			arrival.release()
		}
	}
	if err != nil {
		return s.notAdmitted(ctx, p, err)
	}
	s.cfg.Metrics.TaskSubmitted("created")
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "task created",
		slog.String("task_id", a.id), slog.String("owner_id", a.owner),
		slog.String("idempotency_key_digest", logKey(a.key)), slog.String("model", a.model),
		slog.Int64("reserved_micros", a.amount), slog.String("trace_id", sub.TraceID))
	return Created{Task: a.task, RateLimit: a.rate, jobID: a.jobID, watch: w}, nil
}

// plan is what Create decides about a submission from the submission and
// the catalog alone, before it reads or writes anything.
type plan struct {
	sub Submission
	// key is the idempotency key's stored form (StoredKey): it is stored,
	// looked up and logged only as its keyed digest.
	key string
	// hash is the request's hash as stored, keyed, so that a dump cannot
	// confirm a guessed request.
	hash      []byte
	model     catalog.Model // the first model of the chain that can take the request
	raw       []byte        // the request as sent, to be sealed
	amount    int64         // the reservation (estimate)
	tokens    int64         // the reservation's tokens, input and output, counted by rate limits
	estimated bool          // the model is unpriced: reserved at the default price
	deadline  time.Duration // the task's whole life
}

// planFor validates sub and decides what its task would be. It returns a
// *ValidationError or a *RefusedError for a request no model may take, and
// budget.ErrInsufficient for a reservation above any budget: each before
// anything is read or written.
func (s *intake) planFor(sub Submission) (plan, error) {
	req := sub.Request
	if err := req.Validate(); err != nil {
		return plan{}, err
	}
	if !ValidIdempotencyKey(sub.IdempotencyKey) {
		return plan{}, &ValidationError{Fields: []FieldError{{"Idempotency-Key", "must be 1-255 printable ASCII characters"}}}
	}
	p := plan{sub: sub, key: s.guard.storedKey(sub.IdempotencyKey), hash: s.guard.keyedHash(req.Hash()), deadline: s.cfg.DefaultDeadline}
	fitting, priced, err := s.fittingModels(req)
	if err != nil {
		return plan{}, err
	}
	p.model = fitting[0]
	if p.raw, err = json.Marshal(req); err != nil {
		return plan{}, fmt.Errorf("tasks: encode request: %w", err)
	}
	p.amount, p.estimated = s.fitting.estimate(fitting, priced, req)
	p.tokens = s.fitting.estimatedTokens(fitting, req)
	if p.amount > budget.MaxTotalMicros {
		// More than any budget may hold (a saturated cost among them).
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return plan{}, budget.ErrInsufficient
	}
	if req.DeadlineS > 0 {
		p.deadline = time.Duration(req.DeadlineS) * time.Second
	}
	return p, nil
}

// fittingModels returns the models of the requested model's chain that
// can take req (fit), the first of which runs it, and whether the
// requested model is priced. A request none can take is refused here,
// before anything is written.
func (s *intake) fittingModels(req Request) (fitting []catalog.Model, priced bool, err error) {
	m, priced, err := s.cfg.Catalog.Resolve(req.Model)
	if errors.Is(err, catalog.ErrUnknownModel) {
		return nil, false, unknownModel(err)
	}
	if err != nil {
		return nil, false, err
	}
	if !priced && s.guard.fields().Changes(m.Name) {
		// A pass-through name is sent to the provider and stored, logged
		// and exported as given, so it may not carry what redaction removes.
		return nil, false, &ValidationError{Fields: []FieldError{{"model", "must not contain personal data or a credential"}}}
	}
	fitting, err = s.fitting.fit(m, req)
	return fitting, priced, err
}

// estimate is the reservation for a request: input tokens estimated
// (estimateInput), output tokens at the output limit times the choices
// asked for, at the price of the most expensive model of fitting (the
// models of the chain that can take the request, fit), since any of them
// may end up running it. An unpriced model is reserved at the default
// price and marked estimated; the amount is never zero, so no request
// skips the reservation. A cost beyond an int64 saturates
// (budget.Price.Cost), never wraps: the amount is then above any budget
// and Create refuses it.
func (f *modelFit) estimate(fitting []catalog.Model, priced bool, req Request) (amount int64, estimated bool) {
	for _, x := range fitting {
		in, out := f.reservedTokens(x, req)
		amount = max(amount, x.Price().Cost(in, out))
	}
	return max(amount, 1), !priced
}

// estimatedTokens is the reservation's token count: input and output, as
// estimate reserves them, for the model of fitting that may use the most.
func (f *modelFit) estimatedTokens(fitting []catalog.Model, req Request) int64 {
	var tokens int64
	for _, x := range fitting {
		in, out := f.reservedTokens(x, req)
		tokens = max(tokens, budget.SaturatingAdd(in, out))
	}
	return tokens
}

// prepare turns p into the admission the admitter writes, under a new
// task id: the stored request redacted under the owner's policy, the raw
// one sealed, the job's args. Redaction happens here, once, before
// anything is written.
func (s *intake) prepare(ctx context.Context, p plan, policy string) (*admission, error) {
	stored, err := json.Marshal(s.guard.privacyFor(redact.Policy(policy)).request(p.sub.Request))
	if err != nil {
		return nil, fmt.Errorf("tasks: create: %w", err)
	}
	id := uuid.New().String()
	a := &admission{id: id, owner: p.sub.OwnerID, key: p.key, model: p.model.Name, hash: p.hash, stored: stored,
		sealed: s.cfg.Sealer.Seal(p.raw, []byte(id)), policy: policy, amount: p.amount, estimated: p.estimated, tokens: p.tokens,
		deadline: p.deadline, sub: p.sub, providerKey: p.model.Provider}
	a.args, a.opts = s.enqueueing(ctx, id, p.sub.TraceID, p.model.Provider, p.sub.Inline)
	return a, nil
}

// awaitFor subscribes to the end of a's task when its caller waits for it
// (Submission.Await) rather than running it (Inline); nil otherwise.
// Listening from before the admission commits, the caller cannot miss the
// end of a first attempt that starts at once. It is woken for a blocked
// task too: a Wait with ReturnIfBlocked returns then, any other reads it
// and waits on.
func (s *intake) awaitFor(a *admission) *watch {
	if !a.sub.Await || a.sub.Inline {
		return nil
	}
	ch, stop := s.waiter.subscribe(a.id, true)
	return &watch{ch: ch, stop: stop}
}

// arriveOrQueue decides where a's first attempt runs. It returns a claim
// to run it on arrival, in this process, when its provider key's gate was
// read closed and a call slot is free (claimArrival); a.onArrival is then
// set. Otherwise (and always for a Queue submission) the task takes its
// provider key's queue, and is shed (an *OverloadError) when that queue is
// behind. A streamed task runs in its caller and does neither.
func (s *intake) arriveOrQueue(a *admission, m catalog.Model, gateClosed bool) (*arrivalClaim, error) {
	if a.sub.Inline {
		return nil, nil
	}
	if a.sub.Queue {
		return nil, s.shed.queue(m.Provider)
	}
	if arrival := s.claimArrival(m, gateClosed); arrival != nil {
		a.onArrival = true
		return arrival, nil
	}
	return nil, s.shed.queue(m.Provider)
}

// notAdmitted answers a submission the admitter did not admit: from the
// task that holds its key when a concurrent request took the key first,
// else with err, counted as the refusal it is.
func (s *intake) notAdmitted(ctx context.Context, p plan, err error) (Created, error) {
	switch {
	case errors.Is(err, errKeyTaken):
		f, err := s.lookup(ctx, s.lookupOf(p))
		if err != nil {
			return Created{}, fmt.Errorf("tasks: create: %w", err)
		}
		if f.task == nil {
			return Created{}, fmt.Errorf("tasks: create: idempotency key taken, but no task holds it")
		}
		return s.replayed(*f.task, f.sameRequest)
	case errors.Is(err, ErrIdempotencyKeyReused):
		s.cfg.Metrics.TaskSubmitted("conflict")
		return Created{}, err
	case errors.Is(err, budget.ErrInsufficient):
		s.cfg.Metrics.TaskSubmitted("budget_exceeded")
		return Created{}, err
	case errors.Is(err, ErrRateLimited):
		s.cfg.Metrics.TaskSubmitted("rate_limited")
		s.cfg.Metrics.RateLimited(p.sub.OwnerID, p.sub.Workload)
		return Created{}, err
	}
	return Created{}, fmt.Errorf("tasks: create: %w", err)
}

// replayed answers a retry with the task that holds its key: the task when
// its request hash matches, ErrIdempotencyKeyReused when it does not.
func (s *intake) replayed(t Task, hashOK bool) (Created, error) {
	if !hashOK {
		s.cfg.Metrics.TaskSubmitted("conflict")
		return Created{}, ErrIdempotencyKeyReused
	}
	s.guard.reveal(&t)
	s.cfg.Metrics.TaskSubmitted("replayed")
	return Created{Task: t, Replayed: true}, nil
}

// lookupParams is what lookup reads in its one round trip.
type lookupParams struct {
	owner string
	// key and hash are the client's key and the request's hash as stored
	// (StoredKey, keyedHash).
	key  string
	hash []byte
	// gateOf, when not "", is the provider key whose gate is read.
	gateOf string
	// room, when above zero, is a reservation whose room in the owner's
	// budget is checked (budget.QueueNoHeadroom).
	room int64
	// failedSince, when not zero, reads the owner's failures of the same
	// request since then (retrywindow.go).
	failedSince time.Time
}

// found is what lookup read.
type found struct {
	policy string // the owner's redaction policy
	// task is the owner's task under the key, nil for none; sameRequest
	// says whether its request hash is the request's.
	task        *Task
	sameRequest bool
	gate        gate.Mode // lookupParams.gateOf's gate; gate.Open when not read
	noRoom      bool      // the owner's budget has no room for lookupParams.room
	// failed is the request's latest failure since failedSince; nil for
	// none.
	failed *recentFailure
}

// lookupOf is the lookup of p's key and request hash.
func (s *intake) lookupOf(p plan) lookupParams {
	return lookupParams{owner: p.sub.OwnerID, key: p.key, hash: p.hash}
}

// lookup reads, in one round trip, the owner's redaction policy and the
// owner's task under the key, if any, and what else p asks for.
func (s *intake) lookup(ctx context.Context, p lookupParams) (found, error) {
	f := found{gate: gate.Open}
	b := &pgx.Batch{}
	if p.room > 0 {
		budget.QueueNoHeadroom(b, p.owner, s.cfg.Now(), p.room, &f.noRoom)
	}
	if p.gateOf != "" {
		gate.QueuePeek(b, p.gateOf, &f.gate)
	}
	if !p.failedSince.IsZero() {
		s.queueRecentFailure(b, p, &f.failed)
	}
	b.Queue(`SELECT redaction_policy FROM owners WHERE id = $1`, p.owner).QueryRow(func(r pgx.Row) error {
		return r.Scan(&f.policy)
	})
	b.Queue(`SELECT `+clientViewColumns+`, request_hash = $3 FROM tasks WHERE owner_id = $1 AND idempotency_key = $2`,
		p.owner, p.key, p.hash).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) { return scanTaskInto(r, &f.sameRequest) })
		if len(list) == 1 {
			f.task = &list[0]
		}
		return err
	})
	err := s.pool.SendBatch(ctx, b).Close()
	return f, err
}
