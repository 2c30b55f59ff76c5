package server

import (
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// roomCheckBytes is the body size from which a request's budget room is
// checked before its body is read. Below it, reading, parsing and the
// admission's own check cost about what the extra read of the budget
// would; above it, the body's reading, parsing, redaction and sealing
// would be spent on a request that cannot be admitted.
const roomCheckBytes = 64 << 10

// roomMemory is how long a refusal of roomFirst is remembered: a client
// that keeps sending large requests with no room costs one read of its
// budget a second, not one a request (measured: four such clients at a
// gigabit each raised another owner's p50 by about 22 % with a read per
// request, 11 % with none, docs/BENCHMARKS.md). Room that appears meanwhile
// (a top-up, a settlement that releases a reservation) reaches large
// requests within it; small ones are decided by the admission at once.
const roomMemory = time.Second

// roomFirst refuses a large request (or one of unknown size) with a 402
// before its body is read when the principal's budget (the owner's, or the
// key's workload's, the tighter) has less room than any request reserves
// (tasks.Service.LeastReservation). It is a lower bound, so it never
// refuses a request the admission would take at the moment it reads;
// everything else is left to the admission's own check, in its
// transaction.
func roomFirst(d *Deps) echo.MiddlewareFunc {
	refused := &refusals{until: map[refusalKey]refusal{}}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if n := c.Request().ContentLength; (n >= 0 && n < roomCheckBytes) || d.Budgets == nil {
				return next(c)
			}
			least := d.Tasks.LeastReservation()
			if least == 0 {
				return next(c)
			}
			p := principalOf(c)
			key, now := refusalKey{p.OwnerID, p.Workload}, d.Now()
			if r, ok := refused.get(key, now); ok {
				return r.refusal
			}
			b, found, err := d.Budgets.Room(c.Request().Context(), p.OwnerID, p.Workload)
			if err != nil {
				return err
			}
			if !found || b.Available() >= least {
				return next(c) // the admission says what an owner without a budget gets
			}
			out := &budgetRefusal{reserve: least, atLeast: true, figures: true,
				available: b.Available(), total: b.TotalMicros, reserved: b.ReservedMicros, spent: b.SpentMicros}
			refused.put(key, refusal{refusal: out, until: now.Add(roomMemory)})
			return out
		}
	}
}

// refusalKey is whose budget a refusal read.
type refusalKey struct{ owner, workload string }

type refusal struct {
	refusal *budgetRefusal
	until   time.Time
}

// refusals are roomFirst's remembered refusals, at most maxRefusals.
type refusals struct {
	mu    sync.Mutex
	until map[refusalKey]refusal
}

// maxRefusals bounds the refusals remembered: beyond it, the expired are
// dropped, and if none is, all.
const maxRefusals = 10_000

func (r *refusals) get(k refusalKey, now time.Time) (refusal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.until[k]
	if !ok || !now.Before(x.until) {
		return refusal{}, false
	}
	return x, true
}

func (r *refusals) put(k refusalKey, x refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.until) >= maxRefusals {
		for key, old := range r.until {
			if !x.until.Add(-roomMemory).Before(old.until) {
				delete(r.until, key)
			}
		}
		if len(r.until) >= maxRefusals {
			clear(r.until)
		}
	}
	r.until[k] = x
}
