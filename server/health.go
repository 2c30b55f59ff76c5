package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/migrations"
)

type health struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// healthz: the process is up and serving.
func healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, health{Status: "ok"})
}

// readyz: the database answers and its schema is the one this binary
// expects, and the process is not draining. A load balancer should send
// traffic only on 200; a stopping serve answers 503 draining for its
// drain delay before its listener closes, so that the balancer sees it.
func readyz(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if d.Draining != nil && d.Draining() {
			// A drain is a stop going to plan, not a server error: it
			// is not logged, and the database is not asked.
			c.Set(ctxLogged, true)
			return c.JSON(http.StatusServiceUnavailable, health{Status: "unavailable", Checks: map[string]string{"process": "draining"}})
		}
		checks := map[string]string{"database": "ok", "migrations": "current"}
		status := http.StatusOK
		if err := d.Pool.Ping(ctx); err != nil {
			checks["database"], checks["migrations"] = "unreachable", "unknown"
			status = http.StatusServiceUnavailable
		} else if ok, err := migrations.Current(ctx, d.Pool); err != nil || !ok {
			checks["migrations"] = "behind"
			status = http.StatusServiceUnavailable
		}
		if status != http.StatusOK {
			return c.JSON(status, health{Status: "unavailable", Checks: checks})
		}
		return c.JSON(status, health{Status: "ok", Checks: checks})
	}
}
