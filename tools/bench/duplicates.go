package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// DuplicatesConfig is scenario 3: replayed duplicate POSTs and GET polls of
// existing tasks, each from closed-loop clients. Zero values take the
// defaults.
type DuplicatesConfig struct {
	Keys     int           // tasks created first, then replayed and polled; default 1000
	Clients  []int         // closed-loop clients; one run of each kind per count; default 128
	Duration time.Duration // measured per run; default 20s
	Warmup   time.Duration // unmeasured start of each run; default 2s, negative for none
}

func (c *DuplicatesConfig) defaults() error {
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{128}
	}
	for _, n := range c.Clients {
		if n <= 0 {
			return fmt.Errorf("bench: duplicates clients %d must be > 0", n)
		}
	}
	setDefault(&c.Duration, 20*time.Second)
	if c.Warmup == 0 {
		c.Warmup = 2 * time.Second
	}
	return nil
}

// The kinds of request scenario 3 sends.
const (
	KindReplay = "post-replay" // POST /v1/tasks with a key and body already used
	KindPoll   = "get-poll"    // GET /v1/tasks/{id}
)

// replayTargetPerS is the target for replayed duplicate POSTs on a 2-core
// machine.
const replayTargetPerS = 2000

// DuplicatesResult is what scenario 3 saw.
type DuplicatesResult struct {
	// Keys counts the tasks created for the runs; SetupFinished how many of
	// them had finished when the runs began (a replay of a finished task
	// answers 200, of an unfinished one 202).
	Keys          int             `json:"keys"`
	SetupS        float64         `json:"setup_s"`
	SetupFinished int             `json:"setup_finished"`
	SetupErrors   map[string]int  `json:"setup_errors,omitempty"`
	Runs          []DuplicatesRun `json:"runs"`
}

// DuplicatesRun is one kind of request from one number of clients.
type DuplicatesRun struct {
	Kind      string    `json:"kind"`
	Clients   int       `json:"clients"`
	DurationS float64   `json:"duration_s"`
	Calls     CallStats `json:"calls"`
	// TargetPerS is the target for this kind (0: none stated).
	TargetPerS float64   `json:"target_per_s,omitempty"`
	MetTarget  bool      `json:"met_target"`
	Resources  Resources `json:"server"`
	CPU        CPUShare  `json:"cpu"`
	// PG is Postgres's work over the run, its warm-up and its settle
	// pause, per request answered in all of that time ("per task" in its
	// field names reads "per request").
	PG         *PGCost     `json:"pg,omitempty"`
	Statements []Statement `json:"statements,omitempty"`
	Limit      string      `json:"limit"`
	// Profile is the server's CPU profile of the measured window (see
	// Config.PprofURL), and ProfileError why there is none; both "" when
	// none was asked.
	Profile      string `json:"profile,omitempty"`
	ProfileError string `json:"profile_error,omitempty"`
}

// CPUShare is where the machine's CPU went during a measured window.
type CPUShare struct {
	CPUs int `json:"cpus"`
	// Per request answered in the window, in CPU milliseconds.
	ServerMSPerReq   float64 `json:"server_ms_per_req"`
	PostgresMSPerReq float64 `json:"postgres_ms_per_req"`
	ClientMSPerReq   float64 `json:"client_ms_per_req"` // tollbench itself
	// In CPUs (1.0 = one CPU busy for the whole window).
	Server   float64 `json:"server_cpus"`
	Postgres float64 `json:"postgres_cpus"`
	Client   float64 `json:"client_cpus"`
	Other    float64 `json:"other_cpus"` // everything else on the machine
	// HostBusy is the share of all CPUs busy over the window, 0..1.
	HostBusy float64 `json:"host_busy"`
	// ProjectedPerS is what the machine's CPUs could answer if they did
	// nothing but run the server and Postgres: CPUs × 1000 / (server +
	// Postgres ms per request).
	ProjectedPerS float64 `json:"projected_per_s"`
}

// cpuSnapshot is every CPU counter a window is measured with.
type cpuSnapshot struct {
	server, pg       cpuReading
	self             time.Duration
	hostBusy, hostAt time.Duration
}

func (s *stepper) cpuNow(pgPIDs []int) cpuSnapshot {
	c := cpuSnapshot{pg: readCPU(pgPIDs), self: selfCPU()}
	if s.cfg.ServerPID > 0 {
		c.server = readCPU([]int{s.cfg.ServerPID})
	}
	c.hostBusy, c.hostAt, _ = hostCPU()
	return c
}

// cpuShare divides the CPU used between two snapshots over a window in
// which n requests were answered.
func cpuShare(a, b cpuSnapshot, window time.Duration, n, cpus int) CPUShare {
	sh := CPUShare{CPUs: cpus}
	if window <= 0 {
		return sh
	}
	server, pg, self := cpuUsed(a.server, b.server), cpuUsed(a.pg, b.pg), b.self-a.self
	host := b.hostBusy - a.hostBusy
	w := window.Seconds()
	sh.Server, sh.Postgres, sh.Client = server.Seconds()/w, pg.Seconds()/w, self.Seconds()/w
	sh.Other = max(host.Seconds()/w-sh.Server-sh.Postgres-sh.Client, 0)
	if total := b.hostAt - a.hostAt; total > 0 {
		sh.HostBusy = float64(host) / float64(total)
	}
	if n > 0 {
		sh.ServerMSPerReq, sh.PostgresMSPerReq, sh.ClientMSPerReq = stats.MS(server)/float64(n), stats.MS(pg)/float64(n), stats.MS(self)/float64(n)
	}
	if per := sh.ServerMSPerReq + sh.PostgresMSPerReq; per > 0 {
		sh.ProjectedPerS = float64(cpus) * 1000 / per
	}
	return sh
}

// duplicatesLimit says what set the pace of a run: the CPUs when they
// were (nearly) all busy, and who used them; otherwise waiting.
func duplicatesLimit(r DuplicatesRun) string {
	c := r.CPU
	who := fmt.Sprintf("server %.2f, Postgres %.2f, tollbench %.2f, other processes %.2f CPUs", c.Server, c.Postgres, c.Client, c.Other)
	cost := fmt.Sprintf("server + Postgres spent %.2f + %.2f ms CPU per request, so %d CPUs doing nothing else would answer about %.0f/s",
		c.ServerMSPerReq, c.PostgresMSPerReq, c.CPUs, c.ProjectedPerS)
	if c.HostBusy >= 0.9 {
		return fmt.Sprintf("CPU-bound: the %d CPUs were %.0f%% busy (%s); %s", c.CPUs, 100*c.HostBusy, who, cost)
	}
	return fmt.Sprintf("not CPU-bound: the %d CPUs were %.0f%% busy (%s); %d clients waited p50 %s per request on something else (the server's database pool, locks, the network); %s",
		c.CPUs, 100*c.HostBusy, who, r.Clients, msf(r.Calls.Latency.P50), cost)
}

// dupKey is a task scenario 3 replays and polls.
type dupKey struct{ key, id string }

var errNoTasks = errors.New("bench: duplicates: no task could be created")

// duplicates runs scenario 3: it creates the tasks, then, for each client
// count, replays their POSTs and then polls them.
func (s *stepper) duplicates(ctx context.Context, p *printer) (DuplicatesResult, error) {
	c := s.cfg.Duplicates
	s.setLatency(0)
	s.resetUpstream(ctx)
	p.line("\nduplicates: creating %d tasks to replay and poll", c.Keys)
	start := time.Now()
	keys, finished, errs := s.createKeys(ctx, c.Keys, 16)
	r := DuplicatesResult{Keys: len(keys), SetupS: time.Since(start).Seconds(), SetupFinished: finished}
	if len(errs) > 0 {
		r.SetupErrors = errs
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err := s.vacuumBefore(ctx, "the duplicates runs"); err != nil {
		return r, err
	}
	if len(keys) == 0 {
		return r, fmt.Errorf("%w: %v", errNoTasks, errs)
	}
	p.duplicatesHeader(r, c)
	for _, clients := range c.Clients {
		for _, kind := range []string{KindReplay, KindPoll} {
			run, err := s.duplicatesRun(ctx, kind, clients, keys)
			if err != nil {
				return r, err
			}
			r.Runs = append(r.Runs, run)
			p.duplicatesRun(run)
		}
	}
	return r, nil
}

// createKeys creates n tasks from clients workers, each POST waiting for
// its task to finish (Prefer: wait), so that the runs replay finished
// tasks. It returns the tasks created, how many had finished, and the
// errors by category.
func (s *stepper) createKeys(ctx context.Context, n, clients int) ([]dupKey, int, map[string]int) {
	keys := make([]dupKey, n)
	done := make([]bool, n)
	errs := map[string]int{}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("tb-%s-dup-%d", s.runID, i)
				resp, err := s.load.send(ctx, apiRequest{method: http.MethodPost, path: "/v1/tasks", idempotencyKey: key, prefer: "wait=30"})
				sub := submitted{}
				switch {
				case err != nil:
					sub.err = "POST: " + err.Error()
				case resp.status != http.StatusOK && resp.status != http.StatusAccepted:
					sub.err = fmt.Sprintf("POST %d %s", resp.status, problemCode(resp.body))
				default:
					sub = submitAnswer(resp)
				}
				if sub.err != "" {
					mu.Lock()
					errs[sub.err]++
					mu.Unlock()
					continue
				}
				keys[i], done[i] = dupKey{key: key, id: sub.id}, resp.status == http.StatusOK
			}
		}()
	}
	wg.Wait()
	s.load.http.CloseIdleConnections()
	var out []dupKey
	finished := 0
	for i, k := range keys {
		if k.id == "" {
			continue
		}
		out = append(out, k)
		if done[i] {
			finished++
		}
	}
	return out, finished, errs
}

// duplicatesRun measures one kind of request from clients closed-loop
// clients: CPU over the measured window, Postgres's counters around the
// whole run and its settle pause.
func (s *stepper) duplicatesRun(ctx context.Context, kind string, clients int, keys []dupKey) (DuplicatesRun, error) {
	c := s.cfg.Duplicates
	run := DuplicatesRun{Kind: kind, Clients: clients, DurationS: c.Duration.Seconds()}
	if kind == KindReplay {
		run.TargetPerS = replayTargetPerS
	}
	before, err := s.readGauges(ctx, nil)
	if err != nil {
		return run, err
	}
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan Resources, 1)
	go func() { sampled <- newSampler(s.cfg.ServerPID, s.cfg.BaseURL+"/metrics").run(sctx) }()

	from := time.Now().Add(max(c.Warmup, 0))
	to := from.Add(c.Duration)
	cpu := make(chan [2]cpuSnapshot, 1)
	go func() {
		var snaps [2]cpuSnapshot
		_ = sleepUntil(ctx, from)
		snaps[0] = s.cpuNow(before.pgPIDs)
		_ = sleepUntil(ctx, to)
		snaps[1] = s.cpuNow(before.pgPIDs)
		cpu <- snaps
	}()
	profiled := make(chan error, 1)
	if s.cfg.PprofURL != "" {
		run.Profile = filepath.Join(s.cfg.ProfileDir, fmt.Sprintf("cpu-%s-%d.pprof", kind, clients))
		go func() {
			if err := sleepUntil(ctx, from); err != nil {
				profiled <- err
				return
			}
			profiled <- cpuProfile(ctx, s.cfg.PprofURL, c.Duration, run.Profile)
		}()
	} else {
		profiled <- nil
	}
	calls := closedLoop(ctx, clients, to, func(ctx context.Context, w, i int) (int, string) {
		k := keys[(w+i*clients)%len(keys)]
		if kind == KindReplay {
			return s.replay(ctx, k)
		}
		return s.poll(ctx, k)
	})
	snaps := <-cpu
	if err := <-profiled; err != nil {
		run.Profile, run.ProfileError = "", err.Error()
	}
	s.load.http.CloseIdleConnections()
	stopSampling()
	run.Resources = <-sampled
	if err := ctx.Err(); err != nil {
		return run, err
	}
	run.Calls = summarizeCalls(calls, from, to)
	run.MetTarget = run.TargetPerS > 0 && run.Calls.PerS >= run.TargetPerS && run.Calls.ErrorCount == 0
	run.CPU = cpuShare(snaps[0], snaps[1], to.Sub(from), run.Calls.N, runtime.NumCPU())

	if s.meter != nil {
		if err := sleepUntil(ctx, time.Now().Add(s.cfg.Settle)); err != nil {
			return run, err
		}
		after, err := s.readGauges(ctx, before.pgPIDs)
		if err != nil {
			return run, err
		}
		cost := s.meter.cost(ctx, before.pg, after.pg, len(calls))
		run.PG = &cost
		if s.stmts.ok {
			run.Statements = topStatements(before.stmts, after.stmts, len(calls), 12)
		}
	}
	run.Limit = duplicatesLimit(run)
	return run, nil
}

// replay sends a duplicate POST: the same key and body as the task's
// creation. It must answer 200 or 202 with the same task and
// Idempotent-Replayed: true.
func (s *stepper) replay(ctx context.Context, k dupKey) (int, string) {
	resp, err := s.load.send(ctx, apiRequest{method: http.MethodPost, path: "/v1/tasks", idempotencyKey: k.key})
	switch {
	case err != nil:
		return 0, "POST: " + err.Error()
	case resp.status != http.StatusOK && resp.status != http.StatusAccepted:
		return resp.status, fmt.Sprintf("POST %d %s", resp.status, problemCode(resp.body))
	case resp.replayed != "true":
		return resp.status, fmt.Sprintf("POST answered Idempotent-Replayed: %q", resp.replayed)
	case !sameTask(resp.body, k.id):
		return resp.status, "POST answered another task"
	}
	return resp.status, ""
}

// poll GETs the task; it must answer 200 with the task.
func (s *stepper) poll(ctx context.Context, k dupKey) (int, string) {
	resp, err := s.load.send(ctx, apiRequest{method: http.MethodGet, path: "/v1/tasks/" + k.id})
	switch {
	case err != nil:
		return 0, "GET: " + err.Error()
	case resp.status != http.StatusOK:
		return resp.status, fmt.Sprintf("GET %d %s", resp.status, problemCode(resp.body))
	case !sameTask(resp.body, k.id):
		return resp.status, "GET answered another task"
	}
	return resp.status, ""
}

// sameTask says whether a task body is the task id, without decoding it:
// the load generator's CPU is the server's CPU on this machine.
func sameTask(body []byte, id string) bool {
	return bytes.Contains(body, []byte(`"id":"`+id+`"`))
}
