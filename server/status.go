package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/status"
)

// adminStatus: GET /v1/admin/status (admin). The fleet at a glance, as
// `tollgate status` prints it: queues, provider-key gates, budgets near
// their limits and the oldest unfinished tasks. Queues and gates are those
// of the catalog's provider keys: a key removed from it is not shown.
func adminStatus(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		var keys []string
		if d.Catalog != nil {
			keys = d.Catalog.ProviderKeys()
		}
		r, err := status.Collect(c.Request().Context(), d.Pool, keys)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, r)
	}
}
