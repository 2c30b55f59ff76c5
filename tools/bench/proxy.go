package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// Proxy is a reverse proxy that holds every request for a fixed delay and
// then forwards it: a model's latency, put in front of the fake provider,
// which answers at once. Scripting delays into the fake itself would not
// do, since each scripted response is used up by one call; the proxy's
// delay holds for as many calls as a step makes, and changes between steps
// without restarting anything.
type Proxy struct {
	delay atomic.Int64 // nanoseconds
	// inFlight counts the calls the proxy holds or forwards right now, and
	// peak the most at once since the last ResetPeak: how many model calls
	// Tollgate really had open, whatever its worker pool is set to.
	inFlight atomic.Int64
	peak     atomic.Int64
	ln       net.Listener
	srv      *http.Server
}

// StartProxy listens on addr and forwards to upstream (scheme and host; the
// request path is kept). It returns an error when addr cannot be listened
// on or upstream is not an http(s) URL.
func StartProxy(addr, upstream string) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bench: proxy upstream %q is not an http(s) URL", upstream)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bench: proxy: %w", err)
	}
	p := &Proxy{ln: ln}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		// Tollgate's worker pool may hold hundreds of calls at once; the
		// default transport would keep two idle connections and redial the
		// rest, measuring our dialling instead of Tollgate.
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.enter()
			defer p.inFlight.Add(-1)
			if d := time.Duration(p.delay.Load()); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return // the caller gave up; so does the "model"
				}
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the delay of every call from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// enter counts a call in and raises the peak if it is a new high.
func (p *Proxy) enter() {
	n := p.inFlight.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			return
		}
	}
}

// InFlight is the number of model calls open through the proxy now.
func (p *Proxy) InFlight() int { return int(p.inFlight.Load()) }

// Peak is the most model calls open at once since the last ResetPeak.
func (p *Proxy) Peak() int { return int(p.peak.Load()) }

// ResetPeak starts a new peak from the calls open now.
func (p *Proxy) ResetPeak() { p.peak.Store(p.inFlight.Load()) }

// Close stops the proxy, waiting for calls in flight until ctx ends.
func (p *Proxy) Close(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bench: proxy: %w", err)
	}
	return nil
}
