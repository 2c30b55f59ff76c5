package provider_test

import "github.com/tollgate/tollgate/provider"

// withMeta completes a text answer with the fields a parser also fills.
func withMeta(r *provider.Response, model string, u *provider.Usage, status int) *provider.Response {
	r.Model, r.Usage, r.Status = model, u, status
	return r
}
