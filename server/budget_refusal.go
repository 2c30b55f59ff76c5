package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/tasks"
)

// budgetRefusal is a budget that cannot cover a request, with the figures
// that say why; figures is false when they could not be read. Every
// surface answers it as its 402 (problemOf, oaiAnswerOf, antAnswerOf).
type budgetRefusal struct {
	reserve, available, total, reserved, spent int64
	figures                                    bool
	// atLeast: reserve is the least any request reserves (roomFirst),
	// not this request's own reservation, which was never figured.
	atLeast bool
}

func (e *budgetRefusal) Error() string { return "budget exhausted" }

func (e *budgetRefusal) Unwrap() error { return budget.ErrInsufficient }

// detail says what the request needed and what was left, in micros and in
// units (1 unit = 1,000,000 micros).
func (e *budgetRefusal) detail() string {
	if !e.figures {
		return "The remaining budget cannot cover this request's reservation. Nothing was run or charged; the idempotency key was not used."
	}
	left := max(e.available, 0)
	if e.atLeast {
		return fmt.Sprintf("The remaining budget cannot cover any request's reservation: the least a request reserves is %d micros (%s units) "+
			"and %d micros (%s units) are left this period (total %d, reserved %d, spent %d micros). "+
			"The body was not read: nothing was run or charged; the idempotency key was not used.",
			e.reserve, formatUnits(e.reserve), left, formatUnits(left), e.total, e.reserved, e.spent)
	}
	return fmt.Sprintf("The remaining budget cannot cover this request's reservation: it needs up to %d micros (%s units) "+
		"and %d micros (%s units) are left this period (total %d, reserved %d, spent %d micros). "+
		"Nothing was run or charged; the idempotency key was not used.",
		e.reserve, formatUnits(e.reserve), left, formatUnits(left), e.total, e.reserved, e.spent)
}

// formatUnits writes micros as units, exactly: 1500000 is "1.5".
func formatUnits(micros int64) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-(micros+1))+1
	}
	whole := strconv.FormatUint(u/1_000_000, 10)
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1_000_000), "0")
	if frac == "" {
		return sign + whole
	}
	return sign + whole + "." + frac
}

// budgetRefusalFor is the refusal of req for the principal, with its
// figures: what req would reserve and the tighter of the owner's and the
// key's workload budget. A figure that cannot be read leaves them out.
func budgetRefusalFor(ctx context.Context, d *Deps, p accounts.Principal, req tasks.Request) error {
	out := &budgetRefusal{}
	est, err := d.Tasks.Estimate(req)
	if err != nil || d.Budgets == nil {
		return out
	}
	balances, err := d.Budgets.Balances(ctx, p.OwnerID)
	if err != nil && !errors.Is(err, budget.ErrNotFound) {
		return out
	}
	out.reserve = est.ReservedMicros
	out.tightest(balances, p.Workload)
	out.figures = true
	return out
}

// tightest sets e's balance figures from the balance of balances with the
// least room that binds a key of workload: the owner's own, or the
// workload's. figures says whether any did.
func (e *budgetRefusal) tightest(balances []budget.Balance, workload string) {
	for _, b := range balances {
		if b.Workload != "" && b.Workload != workload {
			continue
		}
		if !e.figures || b.Available() < e.available {
			e.available, e.total, e.reserved, e.spent = b.Available(), b.TotalMicros, b.ReservedMicros, b.SpentMicros
			e.figures = true
		}
	}
}

// submit submits sub for the principal: tasks.Service.Create, whose
// budget refusal becomes a budgetRefusal with its figures.
func submit(ctx context.Context, d *Deps, p accounts.Principal, sub tasks.Submission) (tasks.Created, error) {
	created, err := d.Tasks.Create(ctx, sub)
	if errors.Is(err, budget.ErrInsufficient) {
		return created, budgetRefusalFor(ctx, d, p, sub.Request)
	}
	return created, err
}
