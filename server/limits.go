package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/tasks"
)

// limitsInput is the body of PUT /v1/limits/{owner}: absent is unlimited.
type limitsInput struct {
	RequestsPerMinute *int64                  `json:"requests_per_minute"`
	TokensPerMinute   *int64                  `json:"tokens_per_minute"`
	Workloads         map[string]limitsWindow `json:"workloads"`
}

type limitsWindow struct {
	RequestsPerMinute *int64 `json:"requests_per_minute"`
	TokensPerMinute   *int64 `json:"tokens_per_minute"`
}

// limitsList is the answer of GET /v1/limits.
type limitsList struct {
	Data []limits.Limits `json:"data"`
}

// putLimits: PUT /v1/limits/{owner} (admin). Replaces the owner's rate
// limits, its own and its workloads', all at once.
func putLimits(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := adminOwner(c)
		if err != nil {
			return err
		}
		var in limitsInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		l := limits.Limits{OwnerID: owner, Limit: limits.Limit{RequestsPerMinute: in.RequestsPerMinute, TokensPerMinute: in.TokensPerMinute},
			Workloads: make(map[string]limits.Limit, len(in.Workloads))}
		for name, w := range in.Workloads {
			l.Workloads[name] = limits.Limit(w)
		}
		ctx := c.Request().Context()
		if err := d.Limits.Put(ctx, l); err != nil {
			return err
		}
		out, err := d.Limits.Get(ctx, owner)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// getLimits: GET /v1/limits/{owner} (admin).
func getLimits(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := adminOwner(c)
		if err != nil {
			return err
		}
		out, err := d.Limits.Get(c.Request().Context(), owner)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// listLimits: GET /v1/limits (admin). Every owner that has limits.
func listLimits(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		list, err := d.Limits.List(c.Request().Context())
		if err != nil {
			return err
		}
		if list == nil {
			list = []limits.Limits{}
		}
		return c.JSON(http.StatusOK, limitsList{Data: list})
	}
}

// setRateLimitHeaders sets OpenAI's x-ratelimit headers from a rate
// decision: the tightest requests and tokens limits that apply, each only
// when one does. Resets are in OpenAI's format ("12s", "1m0s").
func setRateLimitHeaders(h http.Header, d *limits.Decision) {
	if d == nil {
		return
	}
	for _, x := range []struct {
		kind string
		s    *limits.State
	}{{"requests", d.Requests}, {"tokens", d.Tokens}} {
		if x.s == nil {
			continue
		}
		h.Set("x-ratelimit-limit-"+x.kind, strconv.FormatInt(x.s.Limit, 10))
		h.Set("x-ratelimit-remaining-"+x.kind, strconv.FormatInt(x.s.Remaining, 10))
		h.Set("x-ratelimit-reset-"+x.kind, wholeSeconds(x.s.Reset).String())
	}
}

// wholeSeconds rounds d up to a whole second, at least one.
func wholeSeconds(d time.Duration) time.Duration {
	return max((d+time.Second-1)/time.Second*time.Second, time.Second)
}

// rateLimitedMessage is the message of a rate-limit refusal, in OpenAI's
// words: which limit, its figure, and when to retry.
func rateLimitedMessage(e *tasks.RateLimitedError) string {
	d := e.Decision
	scope := "this owner"
	if d.Workload != "" {
		scope = "this workload"
	}
	abbr, st := "RPM", d.Requests
	if d.Exceeded == limits.KindTokens {
		abbr, st = "TPM", d.Tokens
	}
	var limit int64
	if st != nil {
		limit = st.Limit
	}
	return fmt.Sprintf("Rate limit reached for %s per min (%s) of %s: Limit %d. Nothing was written and the idempotency key is still free. Please try again in %s.",
		d.Exceeded, abbr, scope, limit, wholeSeconds(d.RetryAfter))
}
