package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/status"
)

// adminStatus: GET /v1/admin/status (admin). The fleet at a glance, as
// `tollgate status` prints it: queues, provider-key gates, budgets near
// their limits and the oldest unfinished tasks.
func adminStatus(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		r, err := status.Collect(c.Request().Context(), d.Pool)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, r)
	}
}
