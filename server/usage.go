package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/csvsafe"
	"github.com/tollgate/tollgate/tasks"
)

type usageRow struct {
	TaskID          string        `json:"task_id"`
	OwnerID         string        `json:"owner_id"`
	Workload        string        `json:"workload"`
	Model           string        `json:"model"`
	InputTokens     int64         `json:"input_tokens"`
	OutputTokens    int64         `json:"output_tokens"`
	Source          budget.Source `json:"source"`
	CostMicros      int64         `json:"cost_micros"`
	ChargedMicros   int64         `json:"charged_micros"`
	ShortfallMicros int64         `json:"shortfall_micros"`
	SettledAt       time.Time     `json:"settled_at"`
	// The classes, parts of input_tokens and output_tokens.
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	ReasoningTokens   int64 `json:"reasoning_tokens"`
}

type usageTotals struct {
	Tasks                 int64 `json:"tasks"`
	InputTokens           int64 `json:"input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	CostMicros            int64 `json:"cost_micros"`
	ChargedMicros         int64 `json:"charged_micros"`
	ShortfallMicros       int64 `json:"shortfall_micros"`
	ReportedMicros        int64 `json:"reported_micros"`
	EstimatedMicros       int64 `json:"estimated_micros"`
	PossiblyChargedMicros int64 `json:"possibly_charged_micros"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteTokens      int64 `json:"cache_write_tokens"`
	ReasoningTokens       int64 `json:"reasoning_tokens"`
}

type usageGroup struct {
	OwnerID     *string    `json:"owner_id"`
	Workload    *string    `json:"workload"`
	Model       *string    `json:"model"`
	PeriodStart *time.Time `json:"period_start"`
	usageTotals
}

type usageReport struct {
	From          time.Time    `json:"from"`
	To            time.Time    `json:"to"`
	GroupBy       []string     `json:"group_by"`
	Rows          []usageRow   `json:"rows"`
	RowsTruncated bool         `json:"rows_truncated"`
	Groups        []usageGroup `json:"groups"`
	Totals        usageTotals  `json:"totals"`
}

// usageFilter reads the query common to the JSON and CSV reports: the
// window [from, to) (default the last 30 days), owner= for finance and admin
// (clients always see only their own), group_by= and limit=.
func usageFilter(c echo.Context) (budget.UsageFilter, error) {
	now := time.Now().UTC()
	to, err := parseTime(c.QueryParam("to"), "to", now)
	if err != nil {
		return budget.UsageFilter{}, err
	}
	from, err := parseTime(c.QueryParam("from"), "from", to.AddDate(0, 0, -30))
	if err != nil {
		return budget.UsageFilter{}, err
	}
	if !from.Before(to) {
		return budget.UsageFilter{}, badRequest("from must be before to.", tasks.FieldError{Field: "from", Message: "must be before to"})
	}
	p := principalOf(c)
	owner := c.QueryParam("owner")
	switch {
	case p.Role == accounts.RoleFinance || p.Role == accounts.RoleAdmin:
	case owner != "" && owner != p.OwnerID:
		return budget.UsageFilter{}, forbidden("Only finance and admin keys may read another owner's usage.")
	default:
		owner = p.OwnerID
	}
	f := budget.UsageFilter{OwnerID: owner, From: from, To: to}
	if g := c.QueryParam("group_by"); g != "" {
		f.GroupBy = strings.Split(g, ",")
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10000 {
			return budget.UsageFilter{}, badRequest("limit must be a whole number from 1 to 10000.", tasks.FieldError{Field: "limit", Message: "must be 1-10000"})
		}
		f.Limit = n
	}
	return f, nil
}

// getUsage: GET /v1/usage. Settled usage rows (up to limit), groups when
// group_by is given, and totals over the whole window.
func getUsage(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := usageFilter(c)
		if err != nil {
			return err
		}
		rep, err := d.Budgets.Usage(c.Request().Context(), f)
		if err != nil {
			return err
		}
		out := usageReport{From: f.From, To: f.To, GroupBy: f.GroupBy, Rows: make([]usageRow, len(rep.Rows)),
			RowsTruncated: rep.Truncated, Groups: make([]usageGroup, len(rep.Groups)), Totals: usageTotals(rep.Totals)}
		if out.GroupBy == nil {
			out.GroupBy = []string{}
		}
		for i, r := range rep.Rows {
			out.Rows[i] = usageRow(r)
		}
		for i, g := range rep.Groups {
			out.Groups[i] = usageGroup{OwnerID: g.OwnerID, Workload: g.Workload, Model: g.Model, PeriodStart: g.PeriodStart, usageTotals: usageTotals(g.UsageTotals)}
		}
		return c.JSON(http.StatusOK, out)
	}
}

// usageCSVHeader is the CSV's column order. It is part of the contract:
// columns are only ever added at the end.
var usageCSVHeader = []string{"settled_at", "task_id", "owner_id", "workload", "model", "source",
	"input_tokens", "output_tokens", "cost_micros", "charged_micros", "shortfall_micros", "cost", "charged",
	"cached_input_tokens", "cache_write_tokens", "reasoning_tokens"}

// getUsageCSV: GET /v1/usage.csv. Every settled row of the window, streamed
// from the database as it is written, so millions of rows never sit in
// memory. Money is integer micros plus a formatted decimal column. Text
// cells that a spreadsheet would run as a formula are quoted (csvsafe).
func getUsageCSV(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := usageFilter(c)
		if err != nil {
			return err
		}
		f.GroupBy = nil
		res := c.Response()
		res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		res.Header().Set("Content-Disposition", `attachment; filename="usage.csv"`)
		// Workloads and model names are client-chosen: no cell may open
		// as a formula in finance's spreadsheet.
		w := csvsafe.NewWriter(res)
		started := false
		n := 0
		err = d.Budgets.StreamUsage(c.Request().Context(), f, func(r budget.UsageRow) error {
			if !started {
				res.WriteHeader(http.StatusOK)
				started = true
				if err := w.Write(usageCSVHeader); err != nil {
					return err
				}
			}
			n++
			if err := w.Write([]string{
				r.SettledAt.UTC().Format(time.RFC3339Nano), r.TaskID, r.OwnerID, r.Workload, r.Model, string(r.Source),
				strconv.FormatInt(r.InputTokens, 10), strconv.FormatInt(r.OutputTokens, 10),
				strconv.FormatInt(r.CostMicros, 10), strconv.FormatInt(r.ChargedMicros, 10), strconv.FormatInt(r.ShortfallMicros, 10),
				budget.FormatMicros(r.CostMicros), budget.FormatMicros(r.ChargedMicros),
				strconv.FormatInt(r.CachedInputTokens, 10), strconv.FormatInt(r.CacheWriteTokens, 10), strconv.FormatInt(r.ReasoningTokens, 10),
			}); err != nil {
				return err
			}
			if n%1000 == 0 {
				w.Flush()
				res.Flush()
			}
			return w.Error()
		})
		if err != nil && !started {
			return err
		}
		if !started {
			res.WriteHeader(http.StatusOK)
			_ = w.Write(usageCSVHeader)
		}
		w.Flush()
		// An error after the header was sent cannot become a problem
		// response; the truncated body (no final newline check) is all the
		// client can be told, so it is logged by the caller's access log.
		return w.Error()
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
