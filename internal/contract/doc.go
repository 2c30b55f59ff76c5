// Package contract checks real HTTP traffic against openapi.yaml, the
// contract of Tollgate's HTTP API.
//
// It owns no part of the API itself: it exists so that the server's tests
// can prove, on every request they make, that what the server answers is
// what the contract promises. Handlers and the spec drift apart quietly;
// wrapping the test client's transport makes the drift fail a test instead.
//
// Only responses are validated. Requests are only routed, so that a test
// calling an undocumented path or method fails, while tests stay free to
// send malformed bodies, missing headers and bad tokens on purpose.
package contract
