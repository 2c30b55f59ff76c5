package server

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/budget"
)

// roomCheckBytes is the body size from which a request's budget room is
// checked before its body is read. Below it, reading, parsing and the
// admission's own check cost about what the extra read of the budget
// would; above it, the body's reading, parsing, redaction and sealing
// would be spent on a request that cannot be admitted.
const roomCheckBytes = 64 << 10

// roomFirst refuses a large request (or one of unknown size) with a 402
// before its body is read when the principal's budget (the owner's, or the
// key's workload's, the tighter) has less room than any request reserves
// (tasks.Service.LeastReservation). It is a lower bound, so it never
// refuses a request the admission would take: everything else is left to
// the admission's own check, in its transaction.
func roomFirst(d *Deps) echo.MiddlewareFunc {
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
			balances, err := d.Budgets.Balances(c.Request().Context(), p.OwnerID)
			if err != nil {
				if errors.Is(err, budget.ErrNotFound) {
					return next(c) // the admission says what an owner without a budget gets
				}
				return err
			}
			out := &budgetRefusal{reserve: least, atLeast: true}
			out.tightest(balances, p.Workload)
			if !out.figures || out.available >= least {
				return next(c)
			}
			return out
		}
	}
}
