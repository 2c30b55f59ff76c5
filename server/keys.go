package server

import (
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/tasks"
)

// Keys over HTTP, for admins: the same store, and the same created_by and
// revoked_by trail, as `tollgate keys`.

type keyInput struct {
	Owner     string  `json:"owner"`
	Role      string  `json:"role"`
	Workload  string  `json:"workload"`
	Name      string  `json:"name"`
	ExpiresAt *string `json:"expires_at"` // RFC 3339, read apart to name the field when malformed
}

// createKey: POST /v1/keys. 201 with the key's secret, shown only here.
func createKey(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		var in keyInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		switch {
		case in.Owner == "":
			return fieldErr("owner", "is required")
		case !accounts.ValidOwner(in.Owner):
			return fieldErr("owner", "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		case in.Role == "":
			return fieldErr("role", "is required")
		}
		role, err := accounts.ParseRole(in.Role)
		if err != nil {
			return fieldErr("role", "must be client, support, finance or admin")
		}
		if in.Workload != "" && !accounts.ValidOwner(in.Workload) {
			return fieldErr("workload", "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		}
		if len([]rune(in.Name)) > accounts.MaxKeyName {
			return fieldErr("name", "must be at most 200 characters")
		}
		var expires *time.Time
		if in.ExpiresAt != nil {
			t, err := time.Parse(time.RFC3339Nano, *in.ExpiresAt)
			switch {
			case err != nil:
				return fieldErr("expires_at", "must be an RFC 3339 time, such as 2027-01-02T15:04:05Z")
			case !t.After(d.Now()):
				return fieldErr("expires_at", "must be in the future")
			}
			expires = &t
		}
		k, err := d.Accounts.NewKey(c.Request().Context(), accounts.KeyParams{Owner: in.Owner, Role: role,
			Workload: in.Workload, Name: in.Name, ExpiresAt: expires, Actor: actor(c)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, k)
	}
}

// listKeys: GET /v1/keys?owner=, every key (of one owner when given),
// newest first, without secrets.
func listKeys(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		owner, err := keysQuery(c.QueryParams())
		if err != nil {
			return err
		}
		keys, err := d.Accounts.ListKeys(c.Request().Context(), owner)
		if err != nil {
			return err
		}
		if keys == nil {
			keys = []accounts.Key{}
		}
		return c.JSON(http.StatusOK, struct {
			Data []accounts.Key `json:"data"`
		}{keys})
	}
}

func keysQuery(q url.Values) (string, error) {
	for name := range q {
		if name != "owner" {
			return "", badRequest("Unknown query parameter.", tasks.FieldError{Field: name, Message: "unknown query parameter; GET /v1/keys takes owner"})
		}
	}
	owner := q.Get("owner")
	if owner != "" {
		return validOwner(owner)
	}
	return "", nil
}

// validOwner returns owner, or a 400 naming the owner field when it is not
// an owner id.
func validOwner(owner string) (string, error) {
	if !accounts.ValidOwner(owner) {
		return "", badRequest("The owner id must be 1-64 letters, digits, '.', '_' or '-'.",
			tasks.FieldError{Field: "owner", Message: "must be 1-64 letters, digits, '.', '_' or '-'"})
	}
	return owner, nil
}

// adminOwner returns the {owner} of a route only admins may use: 403 for
// another role, 400 for a malformed owner id.
func adminOwner(c echo.Context) (string, error) {
	if err := requireRole(c, accounts.RoleAdmin); err != nil {
		return "", err
	}
	return validOwner(c.Param("owner"))
}

// revokeKey: DELETE /v1/keys/{id}. 204; refused at once on every instance.
func revokeKey(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := requireRole(c, accounts.RoleAdmin); err != nil {
			return err
		}
		id := c.Param("id")
		if _, err := uuid.Parse(id); err != nil {
			return accounts.ErrKeyNotFound
		}
		if err := d.Accounts.Revoke(c.Request().Context(), id, actor(c)); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}
