package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// Config is one benchmark run. Zero durations and counts take the
// documented defaults.
type Config struct {
	BaseURL string // Tollgate's API root, e.g. http://127.0.0.1:18480 (required)
	APIKey  string // a client key with a budget that will not run out (required)

	// Scenarios are the scenarios to run (see ParseScenarios); default
	// throughput only. The fields below up to Ceiling are throughput's.
	Scenarios         []string
	Rates             []float64       // arrivals per second, one step each (required for throughput)
	Duration          time.Duration   // arrivals per step; default 20s
	ProviderLatencies []time.Duration // model latencies; every rate runs at each; default 0
	// ProxyAddr is where the latency proxy listens; Tollgate's
	// MODEL_BASE_URL must point at it (http://ProxyAddr/v1). "" runs no
	// proxy, and then every provider latency must be 0.
	ProxyAddr string
	// Upstream is the fake provider's root (http://host:port). The proxy
	// forwards to it, and its call log is emptied before each step so the
	// fake's memory stays flat. "" for none.
	Upstream string

	Agent      AgentConfig
	InFlight   InFlightConfig
	Duplicates DuplicatesConfig

	ServerPID int // the tollgate serve process, for RSS; 0 reads its metric instead
	// ServerWorkers is the TOLLGATE_WORKERS serve runs with, 0 if unknown:
	// it bounds the model calls in flight, so the analysis needs it.
	ServerWorkers int
	DatabaseURL   string // Tollgate's database, for the Postgres cost; "" skips it
	Ceiling       *CeilingConfig
	// PprofURL is the root of the server's pprof listener
	// (TOLLGATE_PPROF_ADDR), http://host:port; when set, each duplicates
	// run takes a CPU profile of its measured window into ProfileDir.
	PprofURL   string
	ProfileDir string

	PollInterval time.Duration // between GETs of an unfinished task; default 20ms
	LongPoll     time.Duration // > 0: follow tasks with long polls (GET with Prefer: wait) instead
	TaskTimeout  time.Duration // a task not finished this long after its arrival is an error; default 60s
	Warmup       time.Duration // unrecorded load before the first step; default 3s, negative for none
	// StepWarmup is unrecorded load at each step's own rate and model
	// latency, after the VACUUM (ANALYZE) that precedes the step: ANALYZE
	// invalidates every cached plan on every connection, and the burst of
	// replanning that follows put 45-128 ms into the first second of each
	// step (p99 of a 15 s step at 300/s is its worst 45 admissions, all in
	// that second). Autovacuum analyzes one table every few minutes in
	// production, not before every 15 s; the burst is reported apart
	// (Step.AfterVacuum). Default 2s, negative for none.
	StepWarmup time.Duration
	// Settle is the idle time after each step before Postgres's counters
	// are read: an idle backend reports its statistics up to 10 s late
	// (PostgreSQL 15's PGSTAT_IDLE_INTERVAL). Default 11s.
	Settle       time.Duration
	AdmissionSLO time.Duration // a step sustains its rate only with admission p99 under this; default 50ms
	// Revision names the code measured (git describe); "" takes the
	// binary's VCS stamp, when it was built with one.
	Revision    string
	MaxInFlight int // tasks followed at once before arrivals are dropped (and counted); default 50000
	// Nice, when above the process's own, is the nice value tollbench
	// (its load and latency proxy) runs the throughput steps at, after
	// the ceiling: see lowerPriority. 0 leaves the priority alone.
	Nice int
}

func (c *Config) defaults() error {
	if c.BaseURL == "" || c.APIKey == "" {
		return errors.New("bench: the API URL and key are required")
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{ScenarioThroughput}
	}
	if len(c.Rates) == 0 && c.runs(ScenarioThroughput) {
		return errors.New("bench: at least one rate is required")
	}
	for _, r := range c.Rates {
		if r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return fmt.Errorf("bench: rate %v must be > 0", r)
		}
	}
	if len(c.ProviderLatencies) == 0 {
		c.ProviderLatencies = []time.Duration{0}
	}
	for _, l := range c.ProviderLatencies {
		if l < 0 {
			return fmt.Errorf("bench: provider latency %v must be >= 0", l)
		}
		if l > 0 && c.ProxyAddr == "" && c.runs(ScenarioThroughput) {
			return fmt.Errorf("bench: provider latency %v needs the latency proxy (-proxy-addr)", l)
		}
	}
	if c.runs(ScenarioAgent) {
		if err := c.Agent.defaults(c.ProxyAddr != ""); err != nil {
			return err
		}
	}
	if c.runs(ScenarioInFlight) {
		if err := c.InFlight.defaults(); err != nil {
			return err
		}
		if c.ProxyAddr == "" {
			return fmt.Errorf("bench: the in-flight scenario's model latency %v needs the latency proxy (-proxy-addr)", c.InFlight.ModelLatency)
		}
	}
	if c.runs(ScenarioDuplicates) {
		if err := c.Duplicates.defaults(); err != nil {
			return err
		}
	}
	if c.ProxyAddr != "" && c.Upstream == "" {
		return errors.New("bench: the latency proxy needs the fake provider's URL (-upstream)")
	}
	setDefault(&c.Duration, 20*time.Second)
	setDefault(&c.PollInterval, 20*time.Millisecond)
	setDefault(&c.TaskTimeout, time.Minute)
	setDefault(&c.Settle, 11*time.Second)
	setDefault(&c.AdmissionSLO, 50*time.Millisecond)
	if c.Warmup == 0 {
		c.Warmup = 3 * time.Second
	}
	if c.StepWarmup == 0 {
		c.StepWarmup = 2 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 50000
	}
	return nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Workers is the TOLLGATE_WORKERS that lets the server keep up with the
// highest rate at the longest model latency: by Little's law a worker is
// busy for the model's latency plus Tollgate's own time (taken as 0.5 s) per
// task, doubled for bursts, and never below Tollgate's default of 100.
func Workers(rates []float64, latencies []time.Duration) int {
	var rate float64
	for _, r := range rates {
		rate = max(rate, r)
	}
	var lat time.Duration
	for _, l := range latencies {
		lat = max(lat, l)
	}
	n := int(math.Ceil(2 * rate * (lat + 500*time.Millisecond).Seconds()))
	return min(max(n, 100), 10000)
}

// Run runs the scenarios of cfg, printing each result to w as it comes:
// throughput (every provider latency and rate, and the ceiling when
// cfg.Ceiling is set), agent (its rates, and its ceiling when
// cfg.Agent.Ceiling is set), in flight, duplicates. It returns the report, or an
// error when the server never becomes healthy or a measurement cannot be
// taken (with the report so far); failed tasks and requests are results,
// not errors.
func Run(ctx context.Context, cfg Config, w io.Writer) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{StartedAt: time.Now().UTC(), Scenarios: cfg.Scenarios, Config: viewOf(cfg)}
	p := &printer{w: w}

	var proxy *Proxy
	if cfg.ProxyAddr != "" {
		var err error
		if proxy, err = StartProxy(cfg.ProxyAddr, cfg.Upstream); err != nil {
			return nil, err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = proxy.Close(sctx)
		}()
	}
	if err := waitHealthy(ctx, cfg.BaseURL+"/healthz", time.Minute); err != nil {
		return nil, err
	}

	if cfg.runs(ScenarioThroughput) || cfg.runs(ScenarioAgent) {
		rep.Notes = append(rep.Notes,
			"latencies are measured from each arrival's due time (open loop), so queueing anywhere counts",
			fmt.Sprintf("e2e is when polling (%s) saw the task finished; added = arrival to the task's finished_at (the finishing transaction's start, by the server's clock) minus the model latency", pollingOf(cfg)),
			"commit/t counts every transaction in Tollgate's database, read-only ones (auth, polls) included; wxact/t counts transactions that wrote",
			"FPI/t is the full-page-image share of WAL/t, set by when checkpoints ran rather than by the work",
			"cpu ms/t is CPU per task of the server process / of the Postgres backends serving it, over the step and its settle pause",
			"load is the host's 1-minute load average after the step: above the CPU count, other work competed with the benchmark",
		)
	}
	if cfg.runs(ScenarioAgent) {
		rep.Notes = append(rep.Notes,
			"agent: every task sends the same agent-sized request (AgentBody); its ceiling is pgbench's script with rows of that request's size (the request stored and sealed), cpu per KiB = cpu per task / the request's KiB",
		)
	}
	if cfg.runs(ScenarioInFlight) {
		rep.Notes = append(rep.Notes,
			"in flight: tasks are followed through the server's metrics (tollgate_tasks_finished_total, tollgate_queue_depth) once a second, then each is read once after the drain; queue = unfinished jobs, running ones included; calls = model calls open at the latency proxy",
		)
	}
	if cfg.runs(ScenarioDuplicates) {
		rep.Notes = append(rep.Notes,
			"duplicates: closed loop, so latency is per request as each client saw it and req/s is answers per second over the measured window (warm-up excluded)",
			"duplicates: cpu is over the measured window, in CPUs and per request: the server, its Postgres backends, tollbench itself (it shares the machine), and every other process; projected = CPUs × 1000 / (server + Postgres ms per request)",
		)
	}
	var conn *pgx.Conn
	var meter *pgMeter
	var stmts *statements
	if cfg.DatabaseURL != "" {
		var err error
		if conn, err = pgx.Connect(ctx, cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("bench: Tollgate's database: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if meter, err = newPGMeter(ctx, conn); err != nil {
			return nil, err
		}
		rep.Notes = append(rep.Notes, "WAL/t and wxact/t: "+meter.source())
		stmts = newStatements(ctx, conn)
		if !stmts.ok {
			rep.Notes = append(rep.Notes, "pg_stat_statements unavailable: "+stmts.why)
		}
	}
	rep.Machine = machine(ctx, conn)
	if cfg.Revision != "" {
		rep.Machine.Revision = cfg.Revision
	}
	p.header(rep)

	load := newLoadClient(cfg.BaseURL, cfg.APIKey, []byte(taskBody), cfg.PollInterval, cfg.LongPoll, cfg.TaskTimeout, cfg.MaxInFlight)
	s := &stepper{cfg: cfg, load: load, proxy: proxy, meter: meter, stmts: stmts, runID: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if conn != nil {
		s.vacuum = conn
		var autovacuum string
		if err := conn.QueryRow(ctx, `SELECT current_setting('autovacuum')`).Scan(&autovacuum); err == nil && autovacuum == "off" {
			s.vacuumSQL = `VACUUM (ANALYZE)`
			rep.Notes = append(rep.Notes, "the server runs with autovacuum off: tollbench VACUUMs Tollgate's database before each step and scenario, "+
				"as autovacuum would between them, so that a measurement does not pay for the dead rows of the ones before")
		} else {
			s.vacuumSQL = `ANALYZE`
			rep.Notes = append(rep.Notes, "tollbench ANALYZEs Tollgate's database before each step and scenario (autovacuum does the rest): "+
				"a database created for the run would otherwise keep, until autovacuum's first pass, plans chosen while its tables were empty")
		}
	}
	if cfg.runs(ScenarioThroughput) {
		if err := s.throughput(ctx, rep, p); err != nil {
			return rep, err
		}
	} else if cfg.Ceiling != nil {
		rep.Notes = append(rep.Notes, "no ceiling: only the throughput scenario is compared with it")
	}
	if cfg.runs(ScenarioAgent) {
		res, err := s.agent(ctx, rep, p)
		rep.Agent = &res
		if err != nil {
			return rep, err
		}
	}
	if cfg.runs(ScenarioInFlight) {
		res, err := s.inFlight(ctx, p)
		rep.InFlight = &res
		if err != nil {
			return rep, err
		}
		p.inFlight(res)
	}
	if cfg.runs(ScenarioDuplicates) {
		res, err := s.duplicates(ctx, p)
		rep.Duplicates = &res
		if err != nil {
			return rep, err
		}
	}
	rep.FinishedAt = time.Now().UTC()
	p.summary(rep)
	return rep, nil
}

// throughput runs scenario 1: the ceiling, the warm-up, then every rate at
// every provider latency, into rep.
func (s *stepper) throughput(ctx context.Context, rep *Report, p *printer) error {
	cfg := s.cfg
	if cfg.Ceiling != nil {
		c, err := s.ceiling(ctx, *cfg.Ceiling, rep, p)
		if err != nil {
			return err
		}
		rep.Ceiling = c
	}
	// After the ceiling, which pgbench runs at the priority it was given.
	defer s.lowerPriority(rep)()
	if err := s.warmUp(ctx, p, cfg.Rates[0], "-warmup-"); err != nil {
		return err
	}
	for _, lat := range cfg.ProviderLatencies {
		p.stepHeader(lat)
		for _, rate := range cfg.Rates {
			st, err := s.step(ctx, lat, rate)
			if err != nil {
				return err
			}
			if rep.Ceiling != nil && rep.Ceiling.BestTPS > 0 {
				st.CeilingRatio = st.TasksPerS / rep.Ceiling.BestTPS
			}
			rep.Steps = append(rep.Steps, st)
			p.step(st)
		}
	}
	rep.Summary = summarize(rep)
	return nil
}

// ceiling measures the pgbench ceiling of cfg. A missing pgbench is a
// note in rep and a nil ceiling, since Tollgate's own figures are still
// worth having; any other failure is an error.
func (s *stepper) ceiling(ctx context.Context, cfg CeilingConfig, rep *Report, p *printer) (*Ceiling, error) {
	p.line("ceiling: pgbench running %s on a scratch database, %s per client count", cfg.Script, cfg.Duration)
	c, err := runCeiling(ctx, cfg, p.ceilingRun)
	switch {
	case errors.Is(err, exec.ErrNotFound):
		rep.Notes = append(rep.Notes, "no ceiling: "+err.Error())
		p.line("ceiling skipped: %v\n", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	p.line("ceiling: %.1f tasks/s at %d clients\n", c.BestTPS, c.BestClients)
	return &c, nil
}

// lowerPriority runs tollbench at s.cfg.Nice until the returned function
// is called (see the package's lowerPriority); a failure either way is a
// note in rep.
func (s *stepper) lowerPriority(rep *Report) (restore func()) {
	if s.cfg.Nice <= 0 {
		return func() {}
	}
	back, err := lowerPriority(s.cfg.Nice)
	if err != nil {
		rep.Notes = append(rep.Notes, "tollbench kept its priority: "+err.Error())
		return func() {}
	}
	return func() {
		if err := back(); err != nil {
			rep.Notes = append(rep.Notes, "tollbench stayed niced after the steps: "+err.Error())
		}
	}
}

// warmUp offers rate for s.cfg.Warmup with a model that answers at once,
// unrecorded, then waits for the settle pause.
func (s *stepper) warmUp(ctx context.Context, p *printer, rate float64, keyInfix string) error {
	if s.cfg.Warmup <= 0 {
		return nil
	}
	p.line("warm-up: %s at %v/s, not recorded", s.cfg.Warmup, rate)
	s.setLatency(0)
	s.load.run(ctx, rate, s.cfg.Warmup, 0, s.runID+keyInfix)
	return sleepUntil(ctx, time.Now().Add(s.cfg.Settle))
}

// stepper runs the measured steps.
type stepper struct {
	cfg   Config
	load  *loadClient
	proxy *Proxy
	meter *pgMeter // nil without a database URL
	stmts *statements
	runID string
	// vacuum, when set, is the connection that runs vacuumSQL on the
	// database before each step: VACUUM (ANALYZE) when the server's
	// autovacuum is off, ANALYZE alone when it is on. The scratch database
	// is created for the run, and a statement first planned while its
	// tables were empty keeps that plan until something invalidates it:
	// with autovacuum on and no ANALYZE, the idempotency lookup's cached
	// plan walked all of the owner's tasks (tasks_owner_created, filtering
	// on the key) and admission p99 grew to 700 ms over the first 40 s of a
	// 300/s step, with 62 POSTs shed, until autovacuum's first pass.
	vacuum    *pgx.Conn
	vacuumSQL string
}

// vacuumBefore VACUUMs Tollgate's database when the server's autovacuum
// is off, as autovacuum would have between two measurements: without it a
// measurement pays for the dead rows of the ones before (River's fetch
// walked the dead versions of 10,000 jobs after the in-flight scenario,
// 1.6-4.5 ms a call); with autovacuum on it ANALYZEs (see
// stepper.vacuum). what names the measurement in the error.
func (s *stepper) vacuumBefore(ctx context.Context, what string) error {
	if s.vacuum == nil {
		return nil
	}
	if _, err := s.vacuum.Exec(ctx, s.vacuumSQL); err != nil {
		return fmt.Errorf("bench: vacuum before %s: %w", what, err)
	}
	return nil
}

func (s *stepper) setLatency(d time.Duration) {
	if s.proxy != nil {
		s.proxy.SetDelay(d)
	}
}

// step runs one rate at one model latency: arrivals for the configured
// duration, every task followed to its end, then the settle pause, with
// the server sampled and gauges read around all of it.
func (s *stepper) step(ctx context.Context, lat time.Duration, rate float64) (Step, error) {
	s.setLatency(lat)
	s.resetUpstream(ctx)
	if err := s.vacuumBefore(ctx, "the step"); err != nil {
		return Step{}, err
	}
	st := Step{ProviderLatencyMS: stats.MS(lat), Rate: rate, DurationS: s.cfg.Duration.Seconds(), Errors: map[string]int{}}
	prefix := fmt.Sprintf("tb-%s-%s-%v-", s.runID, lat, rate)
	if s.cfg.StepWarmup > 0 {
		st.AfterVacuum = admissions(s.load.run(ctx, rate, s.cfg.StepWarmup, lat, prefix+"w-"))
		st.AfterVacuumS = s.cfg.StepWarmup.Seconds()
	}

	before, err := s.readGauges(ctx, nil)
	if err != nil {
		return st, err
	}
	// The server's own timing of the admissions, around the arrivals; a
	// failed scrape leaves it out of the report, not the step.
	metricsURL := s.cfg.BaseURL + "/metrics"
	scrape := &http.Client{Timeout: 5 * time.Second}
	readBefore, berr := readServer(ctx, scrape, metricsURL)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan Resources, 1)
	go func() { sampled <- newSampler(s.cfg.ServerPID, metricsURL).run(sctx) }()

	st.StartedAt = time.Now().UTC()
	outcomes := s.load.run(ctx, rate, s.cfg.Duration, lat, prefix)
	readAfter, aerr := readServer(ctx, scrape, metricsURL)
	if berr == nil && aerr == nil {
		st.ServerAdmission = summarizeBuckets(stats.SubtractBuckets(readAfter.admission, readBefore.admission))
	}
	err = sleepUntil(ctx, time.Now().Add(s.cfg.Settle))
	stopSampling()
	st.Resources = <-sampled
	if err != nil {
		return st, err
	}

	tally(&st, outcomes, lat)
	if berr == nil && aerr == nil {
		st.Pool = poolWaits(readBefore.pool, readAfter.pool, st.Sent)
		st.GC = gcBetween(readBefore.gc, readAfter.gc)
	}
	after, err := s.readGauges(ctx, before.pgPIDs)
	if err != nil {
		return st, err
	}
	s.account(ctx, &st, before, after)
	st.Sustained, st.Verdict = verdict(st, s.cfg.AdmissionSLO)
	return st, nil
}

// gauges is what a step reads before and after its load: Postgres's
// counters and statements, and the CPU time of the server process and of
// the Postgres backends serving its pool.
type gauges struct {
	pg        pgCounters
	stmts     map[int64]statementReading
	pgPIDs    []int
	pgCPU     cpuReading
	serverCPU cpuReading
}

// readGauges reads the gauges; alsoPIDs are backends read at the start,
// read again so that their CPU counts even if the pool has grown since.
func (s *stepper) readGauges(ctx context.Context, alsoPIDs []int) (gauges, error) {
	var g gauges
	if s.cfg.ServerPID > 0 {
		g.serverCPU = readCPU([]int{s.cfg.ServerPID})
	}
	if s.meter == nil {
		return g, nil
	}
	var err error
	if g.pg, err = s.meter.read(ctx); err != nil {
		return g, err
	}
	if s.stmts.ok {
		if g.stmts, err = s.stmts.read(ctx); err != nil {
			return g, err
		}
	}
	if g.pgPIDs, err = s.meter.backendPIDs(ctx); err != nil {
		return g, err
	}
	g.pgCPU = readCPU(append(slices.Clone(g.pgPIDs), alsoPIDs...))
	return g, nil
}

// account fills in what the step cost: Postgres's work and CPU per
// finished task.
func (s *stepper) account(ctx context.Context, st *Step, before, after gauges) {
	n := float64(max(st.Succeeded, 1))
	if after.serverCPU != nil {
		st.ServerCPUMSPerTask = stats.MS(cpuUsed(before.serverCPU, after.serverCPU)) / n
	}
	if s.meter == nil {
		return
	}
	c := s.meter.cost(ctx, before.pg, after.pg, st.Succeeded)
	st.PG = &c
	st.PostgresCPUMSPerTask = stats.MS(cpuUsed(before.pgCPU, after.pgCPU)) / n
	if s.stmts.ok {
		st.Statements = topStatements(before.stmts, after.stmts, st.Succeeded, 12)
	}
}

// admissions summarises how long the admitted POSTs among outcomes took.
func admissions(outcomes []outcome) stats.Summary {
	var d []time.Duration
	for _, o := range outcomes {
		if o.sent && o.admitted {
			d = append(d, o.admission)
		}
	}
	return stats.Summarize(d)
}

// tally turns a step's outcomes into its figures.
// tailWindow is the width of the windows of arrivals that TailShape
// counts: 20 arrivals at 200/s, about one stall.
const tailWindow = 100 * time.Millisecond

func tally(st *Step, outcomes []outcome, lat time.Duration) {
	var admission, e2e, e2eServer, refusals, late []time.Duration
	var finishes, dues []time.Time
	polls := 0
	for _, o := range outcomes {
		if !o.sent {
			continue
		}
		st.Sent++
		polls += o.polls
		late = append(late, o.late)
		if o.admitted {
			st.Admitted++
			admission = append(admission, o.admission)
			dues = append(dues, o.due)
		}
		if o.err != "" {
			st.Errors[o.err]++
			if o.err == shedError {
				st.Shed++
				refusals = append(refusals, o.admission)
			}
			continue
		}
		st.Succeeded++
		e2e = append(e2e, o.e2e)
		if !o.finishedAt.IsZero() {
			e2eServer = append(e2eServer, o.e2eServer)
			finishes = append(finishes, o.finishedAt)
		} else {
			finishes = append(finishes, o.observed)
		}
	}
	for _, n := range st.Errors {
		st.ErrorCount += n
	}
	st.Admission = stats.Summarize(admission)
	st.Tail = stats.Tail(dues, admission, tailWindow)
	st.SentLate = stats.Summarize(late)
	st.Refusal = stats.Summarize(refusals)
	st.E2E = stats.Summarize(e2e)
	st.E2EServer = stats.Summarize(e2eServer)
	if st.E2EServer.N > 0 {
		st.AddedP50MS = st.E2EServer.P50 - stats.MS(lat)
	}
	st.TasksPerS = stats.Throughput(finishes)
	if st.Admitted > 0 {
		st.PollsPerTask = float64(polls) / float64(st.Admitted)
	}
	st.Timeline = timeline(outcomes)
}

// timeline buckets a step by the second: arrivals by their due time,
// finishes by the server's finished_at. A stall shows as seconds with
// a high admission maximum and few finishes, which a step's percentiles
// alone cannot tell from a steady degradation.
func timeline(outcomes []outcome) []Second {
	var start time.Time
	for _, o := range outcomes {
		if o.sent && (start.IsZero() || o.due.Before(start)) {
			start = o.due
		}
	}
	var out []Second
	bucket := func(t time.Time) *Second {
		i := max(int(t.Sub(start)/time.Second), 0)
		for len(out) <= i {
			out = append(out, Second{T: len(out)})
		}
		return &out[i]
	}
	admissions := map[int][]time.Duration{}
	for _, o := range outcomes {
		if !o.sent {
			continue
		}
		b := bucket(o.due)
		b.Arrivals++
		if o.err != "" {
			b.Errors++
		}
		if o.admitted {
			admissions[b.T] = append(admissions[b.T], o.admission)
		}
		if o.ok && !o.finishedAt.IsZero() {
			bucket(o.finishedAt).Finished++
		}
	}
	for i := range out {
		sum := stats.Summarize(admissions[i])
		out[i].AdmissionP99MS, out[i].AdmissionMaxMS = sum.P99, sum.Max
	}
	return out
}

// verdict says whether a step sustained its rate: every task succeeded,
// admission p99 stayed under the SLO, and tasks finished as fast as they
// arrived (within 10%).
func verdict(st Step, slo time.Duration) (bool, string) {
	var why []string
	if st.ErrorCount > 0 {
		why = append(why, fmt.Sprintf("%d errors", st.ErrorCount))
	}
	if st.Admission.P99 >= stats.MS(slo) {
		why = append(why, fmt.Sprintf("admission p99 %.1f ms >= %s", st.Admission.P99, slo))
	}
	if st.TasksPerS < 0.9*st.Rate {
		why = append(why, fmt.Sprintf("finished %.1f/s of %v/s offered", st.TasksPerS, st.Rate))
	}
	if len(why) == 0 {
		return true, "sustained"
	}
	return false, strings.Join(why, "; ")
}

// resetUpstream empties the fake provider's call log, which otherwise grows
// by one entry per call for the life of the process. Best effort.
func (s *stepper) resetUpstream(ctx context.Context) {
	if s.cfg.Upstream == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.cfg.Upstream, "/")+"/_fake/reset", nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// waitHealthy polls url until it answers 200, for at most limit.
func waitHealthy(ctx context.Context, url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return fmt.Errorf("bench: %s did not answer 200 within %s", url, limit)
		}
	}
}

// pollingOf says how the load generator follows tasks.
func pollingOf(cfg Config) string {
	if cfg.LongPoll > 0 {
		return fmt.Sprintf("long polls, GET with Prefer: wait=%d", int(max(cfg.LongPoll, time.Second)/time.Second))
	}
	return "every " + cfg.PollInterval.String()
}
