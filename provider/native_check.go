package provider

import "fmt"

// NativeCarrier is a Client that sends a request made in a provider API
// as the client sent it (native.go), for the APIs it reports.
type NativeCarrier interface {
	CarriesNative(api API) bool
}

// CheckNative returns an *Unsupported naming the first of
// chat.Native.Unmodeled when client, of kind, cannot be given chat's
// native body: the neutral Chat it would be sent instead has no place for
// that field. It returns nil when chat has no native body, nothing
// unmodeled, or client carries its API.
func CheckNative(client Client, kind string, chat Chat) error {
	n := chat.Native
	if n == nil || len(n.Unmodeled) == 0 {
		return nil
	}
	if nc, ok := client.(NativeCarrier); ok && nc.CarriesNative(n.API) {
		return nil
	}
	return &Unsupported{Field: n.Unmodeled[0], Reason: fmt.Sprintf(
		"a provider of kind %s is not sent %s requests as they are, and its own API has no place for this field", kind, n.API)}
}
