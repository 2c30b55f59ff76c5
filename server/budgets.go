package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/redact"
)

type limitInput struct {
	TotalMicros *int64 `json:"total_micros"`
	Period      string `json:"period"`
}

type budgetInput struct {
	limitInput
	Workloads map[string]limitInput `json:"workloads"`
}

type balanceOut struct {
	budget.Balance
	RemainingMicros int64 `json:"remaining_micros"`
}

type budgetOut struct {
	OwnerID string       `json:"owner_id"`
	Budgets []balanceOut `json:"budgets"`
}

func requireRole(c echo.Context, roles ...accounts.Role) error {
	p := principalOf(c)
	for _, r := range roles {
		if p.Role == r {
			return nil
		}
	}
	return forbidden("This key's role may not do that.")
}

// actor names who made a change, for the ledger: the key, never the secret.
func actor(c echo.Context) string {
	p := principalOf(c)
	return string(p.Role) + ":" + p.OwnerID + ":" + p.KeyID
}

func writeBudget(c echo.Context, d *Deps, owner string, status int) error {
	list, err := d.Budgets.Balances(c.Request().Context(), owner)
	if err != nil {
		return err
	}
	out := budgetOut{OwnerID: owner, Budgets: make([]balanceOut, len(list))}
	for i, b := range list {
		out.Budgets[i] = balanceOut{Balance: b, RemainingMicros: b.Available()}
	}
	return c.JSON(status, out)
}

// putBudget: PUT /v1/budgets/{owner} (admin). Sets the owner's cap and,
// optionally, workload caps; each change is a ledger row naming the key
// that made it.
func putBudget(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := adminOwner(c)
		if err != nil {
			return err
		}
		var in budgetInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		limit := func(workload string, l limitInput) (budget.Limit, error) {
			if l.TotalMicros == nil {
				return budget.Limit{}, badRequest("total_micros is required.")
			}
			if l.Period == "" {
				l.Period = string(budget.PeriodNone)
			}
			period, err := budget.ParsePeriod(l.Period)
			if err != nil {
				return budget.Limit{}, err
			}
			return budget.Limit{OwnerID: owner, Workload: workload, Period: period, TotalMicros: *l.TotalMicros, Actor: actor(c)}, nil
		}
		own, err := limit("", in.limitInput)
		if err != nil {
			return err
		}
		limits := []budget.Limit{own}
		for name, l := range in.Workloads {
			if name == "" {
				return badRequest("A workload needs a name.")
			}
			wl, err := limit(name, l)
			if err != nil {
				return err
			}
			limits = append(limits, wl)
		}
		// All or nothing: one refused cap leaves every cap as it was.
		if _, err := d.Budgets.SetLimits(c.Request().Context(), limits); err != nil {
			return err
		}
		return writeBudget(c, d, owner, http.StatusOK)
	}
}

type topupInput struct {
	AmountMicros int64  `json:"amount_micros"`
	Workload     string `json:"workload"`
	Note         string `json:"note"`
}

// postTopup: POST /v1/budgets/{owner}/topups (admin). Adds money to the
// current period of the owner's (or a workload's) budget.
func postTopup(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		var in topupInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		if len(in.Note) > 500 {
			return badRequest("note must be at most 500 characters.")
		}
		if _, err := d.Budgets.Topup(c.Request().Context(), c.Param("owner"), in.Workload, in.AmountMicros, actor(c), d.Tasks.Fields().Apply(redact.FieldTopupNote, in.Note)); err != nil {
			return err
		}
		return writeBudget(c, d, c.Param("owner"), http.StatusCreated)
	}
}

// getBudget: GET /v1/budgets/{owner}. Admin and finance see any owner; an
// owner's own keys see its own.
func getBudget(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		owner := c.Param("owner")
		if owner != p.OwnerID && p.Role != accounts.RoleAdmin && p.Role != accounts.RoleFinance {
			return forbidden("Only admin and finance keys may read another owner's budget.")
		}
		return writeBudget(c, d, owner, http.StatusOK)
	}
}
