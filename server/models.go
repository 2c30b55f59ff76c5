package server

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/tasks"
)

// oaiModel is a model in OpenAI's shape (GET /v1/models). created is 0:
// Tollgate does not know when a provider made the model; owned_by is the
// provider key the model is called on.
type oaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// usableModels is every model a client may name, sorted by id: the
// catalog's and the price list's (catalog.Nameable), without the
// pass-through placeholder, which has no name to list.
func usableModels(c *catalog.Catalog) []oaiModel {
	out := []oaiModel{}
	if c == nil {
		return out
	}
	for m := range c.Nameable() {
		if m.Name != "" {
			out = append(out, oaiModel{ID: m.Name, Object: "model", OwnedBy: m.Provider})
		}
	}
	slices.SortFunc(out, func(a, b oaiModel) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// modelsList: GET /v1/models in OpenAI's shape: every model a client may
// name, so that what is listed is what is accepted and charged.
func modelsList(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.JSON(http.StatusOK, struct {
			Object string     `json:"object"`
			Data   []oaiModel `json:"data"`
		}{Object: "list", Data: usableModels(d.Catalog)})
	}
}

// modelGet: GET /v1/models/{model}, OpenAI's retrieve: one model of the
// list, or 404 model_not_found (a name only pass-through would accept is
// not listed, so not found either). A name with a slash comes
// percent-encoded.
func modelGet(d *Deps) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := url.PathUnescape(c.Param("model"))
		if err != nil {
			id = c.Param("model")
		}
		for _, m := range usableModels(d.Catalog) {
			if m.ID == id {
				return c.JSON(http.StatusOK, m)
			}
		}
		return &apiError{status: http.StatusNotFound, code: "model_not_found",
			detail: "The model '" + id + "' does not exist or you do not have access to it.",
			fields: []tasks.FieldError{{Field: "model", Message: "no such model"}}}
	}
}
