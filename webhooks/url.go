package webhooks

import (
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// The events an endpoint may ask for, one per final task status.
const (
	EventSucceeded = "task.succeeded"
	EventFailed    = "task.failed"
	EventCanceled  = "task.canceled"
)

// eventTypes lists the event types an endpoint may ask for, in their
// canonical order.
var eventTypes = []string{EventSucceeded, EventFailed, EventCanceled}

// checkURL returns a FieldError for raw unless it is an absolute http or
// https URL with a host, no user info, no control characters and at most
// MaxURLLength bytes.
func checkURL(raw string) error {
	switch {
	case raw == "":
		return &FieldError{Field: "url", Message: "url is required"}
	case len(raw) > MaxURLLength:
		return &FieldError{Field: "url", Message: "url must be at most 2048 bytes"}
	case !utf8.ValidString(raw) || strings.IndexFunc(raw, unicode.IsControl) >= 0 || strings.ContainsAny(raw, " \t"):
		return &FieldError{Field: "url", Message: "url must not hold control characters or spaces"}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return &FieldError{Field: "url", Message: "url must be an absolute http or https URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &FieldError{Field: "url", Message: "url must use http or https"}
	}
	if u.User != nil {
		return &FieldError{Field: "url", Message: "url must not carry user info: authenticate the signature instead"}
	}
	if u.Hostname() == "" || u.Opaque != "" {
		return &FieldError{Field: "url", Message: "url must name a host"}
	}
	return nil
}

// checkEvents returns the events, deduplicated in their canonical order,
// or a FieldError naming the first unknown one.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, &FieldError{Field: "events", Message: "events must name at least one of task.succeeded, task.failed, task.canceled"}
	}
	for _, e := range events {
		if !slices.Contains(eventTypes, e) {
			if len(e) > 64 || !utf8.ValidString(e) || strings.IndexFunc(e, unicode.IsControl) >= 0 {
				return nil, &FieldError{Field: "events", Message: "unknown event type"}
			}
			return nil, &FieldError{Field: "events", Message: "unknown event type " + e + " (known: task.succeeded, task.failed, task.canceled)"}
		}
	}
	var out []string
	for _, e := range eventTypes {
		if slices.Contains(events, e) {
			out = append(out, e)
		}
	}
	return out, nil
}
