// Command peer measures the latency of one chat completion against the
// fake model provider called directly, through the Portkey gateway and
// through Tollgate's synchronous OpenAI-compatible endpoint, at
// concurrency 1 and at a fixed open-loop arrival rate, and reports what
// each gateway adds.
//
// The two gateways do different work: Portkey is a stateless proxy that
// forwards the call and stores nothing; Tollgate commits durable state per
// task (task, reservation, job, settlement, replay record) before it
// answers. The figures say what that costs, not which is faster at the
// same job.
//
// run.sh, next to this file, installs Portkey, starts the fake, Portkey and
// Tollgate and runs this program; see it for the whole procedure.
//
// usage:
//
//	PEER_TOLLGATE_KEY=tg_... peer -fake URL -portkey URL -tollgate URL [flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

// config is every setting of one measurement.
type config struct {
	FakeURL     string
	PortkeyURL  string
	TollgateURL string
	TollgateKey string // from PEER_TOLLGATE_KEY, never printed
	Model       string
	Warmup      int
	Sequential  int
	Rate        float64
	Duration    time.Duration
	Pause       time.Duration
	Timeout     time.Duration
	Out         string
	Versions    map[string]string
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.FakeURL, "fake", "", "the fake provider's root URL, e.g. http://127.0.0.1:18781")
	fs.StringVar(&c.PortkeyURL, "portkey", "", "Portkey's root URL, e.g. http://127.0.0.1:18782")
	fs.StringVar(&c.TollgateURL, "tollgate", "", "Tollgate's root URL, e.g. http://127.0.0.1:18783")
	fs.StringVar(&c.Model, "model", "gpt-4o-mini", "the model every request names")
	fs.IntVar(&c.Warmup, "warmup", 200, "unmeasured sequential requests per target before the first run")
	fs.IntVar(&c.Sequential, "sequential", 2000, "requests per target at concurrency 1")
	fs.Float64Var(&c.Rate, "rate", 100, "open-loop arrivals per second")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "open-loop arrivals last this long")
	fs.DurationVar(&c.Pause, "pause", time.Second, "idle time between runs")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.StringVar(&c.Out, "out", "tools/bench/results/peer.json", "where the JSON report goes")
	versions := fs.String("versions", "", "name=version,... recorded in the report as is")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.TollgateKey = getenv("PEER_TOLLGATE_KEY")
	switch {
	case c.FakeURL == "" || c.PortkeyURL == "" || c.TollgateURL == "":
		return c, errors.New("-fake, -portkey and -tollgate are all required")
	case c.TollgateKey == "":
		return c, errors.New("PEER_TOLLGATE_KEY is not set: create a client key with `tollgate keys create`")
	case c.Sequential < 1 || c.Warmup < 0:
		return c, errors.New("-sequential must be at least 1 and -warmup not negative")
	case c.Rate <= 0 || c.Duration <= 0 || int(c.Rate*c.Duration.Seconds()) < 1:
		return c, errors.New("-rate and -duration must give at least one arrival")
	}
	c.Versions = map[string]string{"go (client)": runtime.Version()}
	for _, kv := range strings.Split(*versions, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c.Versions[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return c, nil
}

// targets lists the three ways to the fake, in the order they are run.
func (c config) targets() []target {
	headers := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	fake := strings.TrimRight(c.FakeURL, "/")
	return []target{
		{Name: "fake", Label: "fake direct", URL: fake + "/v1/chat/completions", Header: headers()},
		{Name: "portkey", Label: "Portkey (stateless proxy)", URL: strings.TrimRight(c.PortkeyURL, "/") + "/v1/chat/completions",
			Header: headers("x-portkey-provider", "openai", "x-portkey-custom-host", fake+"/v1", "Authorization", "Bearer sk-peer-bench")},
		{Name: "tollgate", Label: "Tollgate (durable task)", URL: strings.TrimRight(c.TollgateURL, "/") + "/v1/chat/completions",
			Header: headers("Authorization", "Bearer "+c.TollgateKey)},
	}
}

// newClient keeps connections alive and never asks for compression, so
// that no target pays for gzip and the client's cost is the same for all.
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "peer: "+format+"\n", a...) }
	fake := upstream{base: strings.TrimRight(cfg.FakeURL, "/"), client: newClient(cfg.Timeout)}
	rep := newReport(cfg)
	targets := cfg.targets()
	clients := make([]*http.Client, len(targets))
	next := 0 // request number: no two requests of a run carry the same text
	for i, t := range targets {
		clients[i] = newClient(cfg.Timeout)
		if cfg.Warmup == 0 {
			continue
		}
		say("warming up %s with %d requests", t.Label, cfg.Warmup)
		o := sequential(ctx, clients[i], t, cfg.Model, next, cfg.Warmup)
		next += cfg.Warmup
		if o.errors > 0 {
			return fmt.Errorf("%s failed %d of %d warm-up requests, first: %s", t.Label, o.errors, cfg.Warmup, o.first)
		}
	}
	phases := []struct {
		p    phase
		load func(*http.Client, target, int) outcome
		n    int
	}{
		{phase{Name: "sequential", Title: "concurrency 1", Detail: fmt.Sprintf("%d requests one after the other", cfg.Sequential)},
			func(c *http.Client, t target, from int) outcome {
				return sequential(ctx, c, t, cfg.Model, from, cfg.Sequential)
			}, cfg.Sequential},
		{phase{Name: "open_loop", Title: fmt.Sprintf("%g/s open loop", cfg.Rate), Rate: cfg.Rate, Duration: cfg.Duration.String(),
			Detail: fmt.Sprintf("%d arrivals at %g/s for %s, each on schedule whatever the answers", int(cfg.Rate*cfg.Duration.Seconds()), cfg.Rate, cfg.Duration)},
			func(c *http.Client, t target, from int) outcome {
				return openLoop(ctx, c, t, cfg.Model, from, cfg.Rate, cfg.Duration)
			}, int(cfg.Rate * cfg.Duration.Seconds())},
	}
	for _, ph := range phases {
		p := ph.p
		for i, t := range targets {
			if err := sleep(ctx, cfg.Pause); err != nil {
				return err
			}
			if err := fake.reset(ctx); err != nil {
				return err
			}
			say("%s: %s", p.Title, t.Label)
			o := ph.load(clients[i], t, next)
			next += ph.n
			if ctx.Err() != nil {
				return ctx.Err()
			}
			calls, err := fake.calls(ctx)
			if err != nil {
				return err
			}
			p.Targets = append(p.Targets, targetResult{Name: t.Name, Label: t.Label, Summary: o.summary(), UpstreamCalls: calls,
				BySecond: o.seconds()})
		}
		p.Added = addedLatency(p.Targets)
		rep.Phases = append(rep.Phases, p)
	}
	rep.Machine.LoadAvgAfter = stats.LoadAverages()
	rep.print(stdout)
	if err := stats.WriteJSON(cfg.Out, rep); err != nil {
		return err
	}
	say("wrote %s", cfg.Out)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
