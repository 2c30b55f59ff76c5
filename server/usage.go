package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/tasks"
)

type usageRow struct {
	TaskID          string        `json:"task_id"`
	OwnerID         string        `json:"owner_id"`
	Model           string        `json:"model"`
	InputTokens     int64         `json:"input_tokens"`
	OutputTokens    int64         `json:"output_tokens"`
	Source          budget.Source `json:"source"`
	CostMicros      int64         `json:"cost_micros"`
	ChargedMicros   int64         `json:"charged_micros"`
	ShortfallMicros int64         `json:"shortfall_micros"`
	SettledAt       time.Time     `json:"settled_at"`
}

type usageTotals struct {
	Tasks           int64 `json:"tasks"`
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CostMicros      int64 `json:"cost_micros"`
	ChargedMicros   int64 `json:"charged_micros"`
	ShortfallMicros int64 `json:"shortfall_micros"`
	ReportedMicros  int64 `json:"reported_micros"`
	EstimatedMicros int64 `json:"estimated_micros"`
}

type usageReport struct {
	From   time.Time   `json:"from"`
	To     time.Time   `json:"to"`
	Rows   []usageRow  `json:"rows"`
	Totals usageTotals `json:"totals"`
}

// getUsage: GET /v1/usage?from=&to=&owner=. The window is [from, to); it
// defaults to the last 30 days. Clients see their own usage; finance and
// admin see every owner's, or one with owner=.
func getUsage(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		now := time.Now().UTC()
		to, err := parseTime(c.QueryParam("to"), "to", now)
		if err != nil {
			return err
		}
		from, err := parseTime(c.QueryParam("from"), "from", to.AddDate(0, 0, -30))
		if err != nil {
			return err
		}
		if !from.Before(to) {
			return badRequest("from must be before to.", tasks.FieldError{Field: "from", Message: "must be before to"})
		}
		p := principalOf(c)
		owner := c.QueryParam("owner")
		switch {
		case p.Role == accounts.RoleFinance || p.Role == accounts.RoleAdmin:
		case owner != "" && owner != p.OwnerID:
			return forbidden("Only finance and admin keys may read another owner's usage.")
		default:
			owner = p.OwnerID
		}
		rep, err := d.Budgets.Usage(c.Request().Context(), budget.UsageFilter{OwnerID: owner, From: from, To: to})
		if err != nil {
			return err
		}
		out := usageReport{From: from, To: to, Rows: make([]usageRow, len(rep.Rows)), Totals: usageTotals(rep.Totals)}
		for i, r := range rep.Rows {
			out.Rows[i] = usageRow(r)
		}
		return c.JSON(http.StatusOK, out)
	}
}

// parseTime accepts RFC 3339 or a bare date (midnight UTC).
func parseTime(s, field string, deflt time.Time) (time.Time, error) {
	if s == "" {
		return deflt, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, badRequest(field+" must be an RFC 3339 time or a YYYY-MM-DD date.",
		tasks.FieldError{Field: field, Message: "must be RFC 3339 or YYYY-MM-DD"})
}
