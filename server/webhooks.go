package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/tasks"
	"github.com/tollgate/tollgate/webhooks"
)

// webhookOwner returns the {owner} of a webhook route when the caller may
// manage its webhook: an admin key, or any key of that owner.
func webhookOwner(c echo.Context, d *Deps) (string, error) {
	p := principalOf(c)
	owner, err := validOwner(c.Param("owner"))
	if err != nil {
		return "", err
	}
	if owner != p.OwnerID && p.Role != accounts.RoleAdmin {
		return "", forbidden("Only admin keys may manage another owner's webhook.")
	}
	if d.Webhooks == nil {
		return "", &apiError{status: http.StatusNotFound, code: "not_found", detail: "Webhooks are not available on this server."}
	}
	return owner, nil
}

type webhookInput struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
}

// putWebhook: PUT /v1/owners/{owner}/webhook. Creates the owner's webhook
// (201, with its secret, shown this once) or changes its URL and events
// (200, without the secret).
func putWebhook(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := webhookOwner(c, d)
		if err != nil {
			return err
		}
		var in webhookInput
		if err := decodeJSON(c, d.MaxBodyBytes, &in); err != nil {
			return err
		}
		if in.URL == nil {
			return badRequest("url is required.", tasks.FieldError{Field: "url", Message: "required"})
		}
		// An admin key may point a webhook at private addresses; an
		// owner's own key only at those the operator allows.
		e, created, err := d.Webhooks.Put(c.Request().Context(), webhooks.PutParams{Owner: owner, URL: *in.URL, Events: in.Events,
			PrivateAllowed: principalOf(c).Role == accounts.RoleAdmin})
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		if created {
			return c.JSON(http.StatusCreated, e)
		}
		return c.JSON(http.StatusOK, e)
	}
}

// getWebhook: GET /v1/owners/{owner}/webhook, without the secret.
func getWebhook(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := webhookOwner(c, d)
		if err != nil {
			return err
		}
		e, err := d.Webhooks.Get(c.Request().Context(), owner)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, e)
	}
}

// deleteWebhook: DELETE /v1/owners/{owner}/webhook (204); its events not
// yet delivered are dropped.
func deleteWebhook(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := webhookOwner(c, d)
		if err != nil {
			return err
		}
		if err := d.Webhooks.Delete(c.Request().Context(), owner); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

// rotateWebhook: POST /v1/owners/{owner}/webhook/rotate. A new secret,
// shown this once; the old one keeps signing, beside it, for 24 hours.
func rotateWebhook(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := webhookOwner(c, d)
		if err != nil {
			return err
		}
		e, err := d.Webhooks.Rotate(c.Request().Context(), owner)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, e)
	}
}

// listWebhookDeliveries: GET /v1/owners/{owner}/webhook/deliveries?limit=,
// newest first.
func listWebhookDeliveries(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		owner, err := webhookOwner(c, d)
		if err != nil {
			return err
		}
		limit := 50
		for name := range c.QueryParams() {
			if name != "limit" {
				return badRequest("Unknown query parameter "+strconv.Quote(name)+"; this endpoint takes limit.",
					tasks.FieldError{Field: name, Message: "unknown query parameter"})
			}
		}
		if s := c.QueryParam("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 200 {
				return badRequest("limit must be a whole number from 1 to 200.", tasks.FieldError{Field: "limit", Message: "must be 1-200"})
			}
			limit = n
		}
		list, err := d.Webhooks.Deliveries(c.Request().Context(), owner, limit)
		if err != nil {
			return err
		}
		if list == nil {
			list = []webhooks.Delivery{}
		}
		return c.JSON(http.StatusOK, map[string]any{"owner_id": owner, "deliveries": list})
	}
}

// webhookProblem maps the webhooks package's errors; ok false for others.
func webhookProblem(err error) (status int, code, detail string, fields []tasks.FieldError, ok bool) {
	var fe *webhooks.FieldError
	switch {
	case errors.As(err, &fe):
		return http.StatusBadRequest, "invalid_request", "The webhook is invalid: " + fe.Field + ".",
			[]tasks.FieldError{{Field: fe.Field, Message: fe.Message}}, true
	case errors.Is(err, webhooks.ErrNotFound):
		return http.StatusNotFound, "not_found", "This owner has no webhook.", nil, true
	}
	return 0, "", "", nil, false
}

// RenderTask returns the webhooks' Render for svc: the owner's task as a
// webhook event carries it (tasks.Service.EventView decides what of its
// output the owner's privacy policy lets leave). *svc is read at each
// call, so the service may be made after the webhooks that render with it.
func RenderTask(svc **tasks.Service) func(ctx context.Context, owner, id string) (json.RawMessage, error) {
	return func(ctx context.Context, owner, id string) (json.RawMessage, error) {
		t, err := (*svc).EventView(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		return json.Marshal(t)
	}
}
