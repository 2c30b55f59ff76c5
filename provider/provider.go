package provider

import "context"

// Client makes one model call.
type Client interface {
	// Complete sends req once, without retrying. On failure it returns a nil
	// Response and an error that is always a *Error, whose Class says what the
	// caller may do next.
	Complete(ctx context.Context, req Request) (*Response, error)
}
