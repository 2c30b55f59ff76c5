// Package server is Tollgate's HTTP face: routes, authentication, request
// decoding and the one table that turns domain errors into RFC 9457
// problems. Handlers are thin: decode, check, call the domain, encode.
//
// endpoints.go lists the whole API surface and reads like openapi.yaml, which
// is the contract; contract tests validate every response the tests see
// against it.
package server
