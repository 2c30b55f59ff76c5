package webhooks

import "errors"

// ErrNotFound is returned for an owner that has no webhook.
var ErrNotFound = errors.New("webhooks: no webhook for this owner")

// FieldError is an endpoint refused for one field's value.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "webhooks: " + e.Field + ": " + e.Message }
