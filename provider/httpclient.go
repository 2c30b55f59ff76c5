package provider

import (
	"net/http"
	"time"
)

// NewHTTPClient returns the http.Client a server's provider adapters share:
// it keeps up to idlePerHost idle connections to each provider host, where a
// plain http.Client keeps two.
//
// With two, every call beyond the second that overlaps others dials a new
// connection (and, against a real provider, runs a TLS handshake) and closes
// one when it ends: at 300 calls a second the server spent 7 % of its CPU
// dialing the fake provider on loopback alone, and each closed connection
// leaves a socket in TIME_WAIT. idlePerHost should be the number of calls
// that may be open to one host at once (TOLLGATE_WORKERS); connections idle
// for 90 s are closed, so a burst does not hold its sockets forever.
func NewHTTPClient(idlePerHost int) *http.Client {
	if idlePerHost < 1 {
		idlePerHost = 1
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no limit across hosts; each host's is idlePerHost
	tr.MaxIdleConnsPerHost = idlePerHost
	tr.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: tr}
}
