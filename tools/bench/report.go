package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// Report is a whole run, as written to tools/bench/results/*.json.
type Report struct {
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
	Machine    Machine    `json:"machine"`
	Scenarios  []string   `json:"scenarios"`
	Config     ConfigView `json:"config"`
	Notes      []string   `json:"notes"`
	// Throughput (scenario 1).
	Ceiling *Ceiling    `json:"ceiling,omitempty"`
	Steps   []Step      `json:"steps"`
	Summary []Sustained `json:"summary"`
	// Agent is the agent-sized requests' throughput, when run.
	Agent *AgentResult `json:"agent,omitempty"`
	// InFlight is scenario 2 and Duplicates scenario 3, when run.
	InFlight   *InFlightResult   `json:"in_flight,omitempty"`
	Duplicates *DuplicatesResult `json:"duplicates,omitempty"`
}

// Step is one rate at one model latency.
type Step struct {
	// StartedAt is when the measured arrivals began: timeline second t is
	// StartedAt + t, to lay beside the server's and PostgreSQL's logs.
	StartedAt         time.Time `json:"started_at"`
	ProviderLatencyMS float64   `json:"provider_latency_ms"`
	Rate              float64   `json:"rate"`
	DurationS         float64   `json:"duration_s"`
	Sent              int       `json:"sent"`
	Admitted          int       `json:"admitted"`
	Succeeded         int       `json:"succeeded"`
	// Admission is arrival → POST answered 200/202.
	Admission stats.Summary `json:"admission"`
	// ServerAdmission is the server's own timing of the step's POSTs
	// (tollgate_http_request_seconds), routing to answer written, every
	// answer included: the rest of Admission is the client's side, the
	// connection and the machine's scheduling.
	ServerAdmission ServerLatency `json:"server_admission,omitzero"`
	// Pool is how the server's connection pool served the step
	// (tollgate_db_pool_*): a wait for a connection is time an admission
	// can spend before PostgreSQL sees it.
	Pool PoolWaits `json:"server_pool,omitzero"`
	// GC is the server's garbage collection during the step.
	GC ServerGC `json:"server_gc,omitzero"`
	// SentLate is arrival due → its POST leaving tollbench: the harness's
	// own share of Admission. Large values mean the load generator, not
	// the server, was behind.
	SentLate stats.Summary `json:"sent_late"`
	// Tail is how the slowest 1 % of the admissions spread in time.
	Tail stats.TailShape `json:"admission_tail,omitzero"`
	// E2E is arrival → finish seen by polling; E2EServer is arrival → the
	// task's finished_at.
	E2E        stats.Summary `json:"e2e"`
	E2EServer  stats.Summary `json:"e2e_server_clock"`
	AddedP50MS float64       `json:"added_p50_ms"` // E2EServer p50 minus the model latency
	// TasksPerS is the rate at which tasks finished (see Throughput).
	TasksPerS    float64        `json:"tasks_per_s"`
	CeilingRatio float64        `json:"ceiling_ratio,omitempty"`
	ErrorCount   int            `json:"error_count"`
	Errors       map[string]int `json:"errors"`
	// Shed counts the POSTs refused with 503 overloaded (among Errors),
	// and Refusal is arrival → that refusal: load shedding is only worth
	// its errors if the refusals come fast.
	Shed         int           `json:"shed"`
	Refusal      stats.Summary `json:"refusal"`
	PollsPerTask float64       `json:"polls_per_task"`
	Resources    Resources     `json:"server"`
	// CPU per finished task over the step and its settle pause: the
	// server process, and the Postgres backends serving its pool (when
	// Postgres runs on this machine; a backend that exits mid-step is
	// missed).
	ServerCPUMSPerTask   float64     `json:"server_cpu_ms_per_task"`
	PostgresCPUMSPerTask float64     `json:"postgres_cpu_ms_per_task"`
	PG                   *PGCost     `json:"pg,omitempty"`
	Statements           []Statement `json:"statements,omitempty"`
	Sustained            bool        `json:"sustained"`
	Verdict              string      `json:"verdict"`
	Timeline             []Second    `json:"timeline"`
	// AfterVacuum is the admissions of the unrecorded load
	// (Config.StepWarmup, AfterVacuumS seconds) between the VACUUM
	// (ANALYZE) before the step and its measurement: what replanning every
	// statement costs, kept apart from the steady state.
	AfterVacuum  stats.Summary `json:"after_vacuum_admission,omitzero"`
	AfterVacuumS float64       `json:"after_vacuum_s,omitempty"`
}

// Second is one second of a step (see timeline).
type Second struct {
	T              int     `json:"t"`
	Arrivals       int     `json:"arrivals"`
	AdmissionP99MS float64 `json:"admission_p99_ms"`
	AdmissionMaxMS float64 `json:"admission_max_ms"`
	Finished       int     `json:"finished"`
	Errors         int     `json:"errors"`
}

// Sustained is the best a model latency sustained: the highest finishing
// rate of a step that passed (see verdict).
type Sustained struct {
	ProviderLatencyMS float64 `json:"provider_latency_ms"`
	TasksPerS         float64 `json:"tasks_per_s"`
	Rate              float64 `json:"rate"`
	AdmissionP99MS    float64 `json:"admission_p99_ms"`
	CeilingRatio      float64 `json:"ceiling_ratio,omitempty"`
	Note              string  `json:"note,omitempty"`
}

// ConfigView is the configuration as reported: no key.
type ConfigView struct {
	BaseURL           string          `json:"base_url"`
	Rates             []float64       `json:"rates"`
	DurationS         float64         `json:"duration_s"`
	ProviderLatencyMS []float64       `json:"provider_latency_ms"`
	ProxyAddr         string          `json:"proxy_addr"`
	Upstream          string          `json:"upstream"`
	ServerPID         int             `json:"server_pid"`
	PollIntervalMS    float64         `json:"poll_interval_ms"`
	LongPollS         float64         `json:"long_poll_s,omitempty"`
	TaskTimeoutS      float64         `json:"task_timeout_s"`
	WarmupS           float64         `json:"warmup_s"`
	SettleS           float64         `json:"settle_s"`
	AdmissionSLOMS    float64         `json:"admission_slo_ms"`
	PGBenchClients    []int           `json:"pgbench_clients,omitempty"`
	PGBenchDurationS  float64         `json:"pgbench_duration_s,omitempty"`
	ServerWorkers     int             `json:"server_workers,omitempty"`
	Nice              int             `json:"nice,omitempty"` // tollbench's nice value during the throughput steps
	Agent             *AgentView      `json:"agent,omitempty"`
	InFlight          *InFlightView   `json:"in_flight,omitempty"`
	Duplicates        *DuplicatesView `json:"duplicates,omitempty"`
}

// AgentView is the agent scenario's configuration as reported.
type AgentView struct {
	Rates            []float64 `json:"rates"`
	ModelLatencyMS   float64   `json:"model_latency_ms"`
	Tools            int       `json:"tools"`
	Messages         int       `json:"messages"`
	TargetBytes      int       `json:"target_bytes"`
	PGBenchClients   []int     `json:"pgbench_clients,omitempty"`
	PGBenchDurationS float64   `json:"pgbench_duration_s,omitempty"`
}

// InFlightView is scenario 2's configuration as reported.
type InFlightView struct {
	Tasks          int     `json:"tasks"`
	ModelLatencyMS float64 `json:"model_latency_ms"`
	Clients        int     `json:"clients"`
	Rate           float64 `json:"rate"`
	TimeoutS       float64 `json:"timeout_s"`
}

// DuplicatesView is scenario 3's configuration as reported.
type DuplicatesView struct {
	Keys      int     `json:"keys"`
	Clients   []int   `json:"clients"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
}

func viewOf(c Config) ConfigView {
	v := ConfigView{
		BaseURL: c.BaseURL, Rates: c.Rates, DurationS: c.Duration.Seconds(), ProxyAddr: c.ProxyAddr,
		Upstream: c.Upstream, ServerPID: c.ServerPID, PollIntervalMS: stats.MS(c.PollInterval), LongPollS: c.LongPoll.Seconds(),
		TaskTimeoutS: c.TaskTimeout.Seconds(), WarmupS: max(c.Warmup, 0).Seconds(), SettleS: c.Settle.Seconds(),
		AdmissionSLOMS: stats.MS(c.AdmissionSLO), Nice: c.Nice,
	}
	for _, l := range c.ProviderLatencies {
		v.ProviderLatencyMS = append(v.ProviderLatencyMS, stats.MS(l))
	}
	if c.Ceiling != nil {
		v.PGBenchClients, v.PGBenchDurationS = c.Ceiling.Clients, c.Ceiling.Duration.Seconds()
	}
	v.ServerWorkers = c.ServerWorkers
	if c.runs(ScenarioAgent) {
		a := c.Agent
		v.Agent = &AgentView{Rates: a.Rates, ModelLatencyMS: stats.MS(a.ModelLatency), Tools: a.Shape.Tools, Messages: a.Shape.Messages, TargetBytes: a.Shape.Bytes}
		if a.Ceiling != nil {
			v.Agent.PGBenchClients, v.Agent.PGBenchDurationS = a.Ceiling.Clients, a.Ceiling.Duration.Seconds()
		}
	}
	if c.runs(ScenarioInFlight) {
		f := c.InFlight
		v.InFlight = &InFlightView{Tasks: f.Tasks, ModelLatencyMS: stats.MS(f.ModelLatency), Clients: f.Clients, Rate: f.Rate, TimeoutS: f.Timeout.Seconds()}
	}
	if c.runs(ScenarioDuplicates) {
		d := c.Duplicates
		v.Duplicates = &DuplicatesView{Keys: d.Keys, Clients: d.Clients, DurationS: d.Duration.Seconds(), WarmupS: max(d.Warmup, 0).Seconds()}
	}
	return v
}

// Machine is where the run happened.
type Machine struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	Go         string `json:"go"`
	Postgres   string `json:"postgres"`
	// Revision is the VCS revision tollbench (and, with make bench,
	// tollgate) was built from; "-dirty" when the tree had changes.
	Revision string `json:"revision"`
}

// machine describes this host; conn, when not nil, names the Postgres
// version. Anything unreadable is left empty.
func machine(ctx context.Context, conn *pgx.Conn) Machine {
	m := Machine{OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				m.Revision = kv.Value + m.Revision
			case "vcs.modified":
				if kv.Value == "true" {
					m.Revision += "-dirty"
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for line := range strings.Lines(string(b)) {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				m.MemTotalMB = kb / 1024
				break
			}
		}
	}
	if conn != nil {
		_ = conn.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&m.Postgres)
	}
	return m
}

// summarize finds, per model latency, the best step that sustained its
// rate.
func summarize(r *Report) []Sustained {
	var out []Sustained
	for _, lat := range r.Config.ProviderLatencyMS {
		out = append(out, bestSustained(r.Steps, lat))
	}
	return out
}

// bestSustained is the fastest of steps at model latency lat that
// sustained its rate, with a note when none or all did.
func bestSustained(steps []Step, lat float64) Sustained {
	s := Sustained{ProviderLatencyMS: lat}
	passed, total := 0, 0
	for _, st := range steps {
		if st.ProviderLatencyMS != lat {
			continue
		}
		total++
		if !st.Sustained {
			continue
		}
		passed++
		if st.TasksPerS > s.TasksPerS {
			s.TasksPerS, s.Rate, s.AdmissionP99MS, s.CeilingRatio = st.TasksPerS, st.Rate, st.Admission.P99, st.CeilingRatio
		}
	}
	switch {
	case passed == 0:
		s.Note = "no rate was sustained: lower the rates"
	case passed == total:
		s.Note = "every rate was sustained: the limit is higher, add rates to find it"
	}
	return s
}

// WriteJSON writes the report to path, creating its directory.
func (r *Report) WriteJSON(path string) error { return stats.WriteJSON(path, r) }

// printer writes the human-readable report as results arrive.
type printer struct{ w io.Writer }

func (p *printer) line(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }

func (p *printer) header(r *Report) {
	m := r.Machine
	p.line("tollbench: %s, %d CPUs (%s), %d MB, Linux %s, %s, PostgreSQL %s, revision %s", m.Hostname, m.CPUs, m.CPUModel,
		m.MemTotalMB, m.Kernel, m.Go, m.Postgres, m.Revision)
	c := r.Config
	p.line("target %s; scenarios %s; TOLLGATE_WORKERS %s", c.BaseURL, strings.Join(r.Scenarios, ", "), orUnknown(c.ServerWorkers))
	if slices.Contains(r.Scenarios, ScenarioThroughput) {
		polling := fmt.Sprintf("poll every %g ms", c.PollIntervalMS)
		if c.LongPollS > 0 {
			polling = fmt.Sprintf("long polls (Prefer: wait=%g)", c.LongPollS)
		}
		niced := ""
		if c.Nice > 0 {
			niced = fmt.Sprintf("; tollbench at nice %d during the steps", c.Nice)
		}
		p.line("throughput: rates %v/s for %gs each; model latency %v ms; %s; admission SLO %g ms%s",
			c.Rates, c.DurationS, c.ProviderLatencyMS, polling, c.AdmissionSLOMS, niced)
	}
	if a := c.Agent; a != nil {
		p.line("agent: %d tools, %d messages, about %d bytes a request; rates %v/s for %gs each; model latency %g ms",
			a.Tools, a.Messages, a.TargetBytes, a.Rates, c.DurationS, a.ModelLatencyMS)
	}
	if f := c.InFlight; f != nil {
		p.line("in flight: %d tasks at a model latency of %g ms from %d submitters%s; at most %gs",
			f.Tasks, f.ModelLatencyMS, f.Clients, rateNote(f.Rate), f.TimeoutS)
	}
	if d := c.Duplicates; d != nil {
		p.line("duplicates: %d tasks, replayed and polled by %v closed-loop clients for %gs each after %gs of warm-up",
			d.Keys, d.Clients, d.DurationS, d.WarmupS)
	}
	p.line("")
}

func (p *printer) ceilingRun(r CeilingRun) {
	p.line("  pgbench -c %-3d %8.1f tasks/s  latency %6.2f ms  failed %d  commits/task %.2f  wxact/task %.2f  WAL %s/task (FPI %s)  host load %.1f",
		r.Clients, r.TPS, r.LatencyMS, r.Failed, r.Cost.CommitsPerTask, r.Cost.WriteXactsPerTask,
		bytesIEC(r.Cost.WALBytesPerTask), bytesIEC(r.Cost.WALFPIPerTask), r.HostLoad)
}

const stepColumns = "%6s %6s | %7s %7s %7s | %7s %7s %7s | %8s %6s | %5s | %11s %9s %11s | %8s %7s %8s %8s %7s | %4s\n"

func (p *printer) stepHeader(lat time.Duration) {
	p.line("\nmodel latency %s", lat)
	fmt.Fprintf(p.w, stepColumns, "rate", "sent", "adm p50", "p95", "p99", "e2e p50", "p99", "added",
		"tasks/s", "×ceil", "errs", "rss MB pk/end", "gor pk/end", "cpu ms/t", "commit/t", "wxact/t", "WAL/t", "FPI/t", "polls/t", "load")
}

func (p *printer) step(s Step) {
	ratio, commits, wxacts, wal, fpi := "-", "-", "-", "-", "-"
	if s.CeilingRatio > 0 {
		ratio = fmt.Sprintf("%.3f", s.CeilingRatio)
	}
	if s.PG != nil {
		commits = fmt.Sprintf("%.2f", s.PG.CommitsPerTask)
		wxacts = fmt.Sprintf("%.2f", s.PG.WriteXactsPerTask)
		wal = bytesIEC(s.PG.WALBytesPerTask)
		if s.PG.WALAttributed {
			fpi = bytesIEC(s.PG.WALFPIPerTask)
		}
	}
	fmt.Fprintf(p.w, stepColumns,
		fmt.Sprintf("%g", s.Rate), fmt.Sprint(s.Sent),
		msf(s.Admission.P50), msf(s.Admission.P95), msf(s.Admission.P99),
		msf(s.E2E.P50), msf(s.E2E.P99), msf(s.AddedP50MS),
		fmt.Sprintf("%.1f", s.TasksPerS), ratio, fmt.Sprint(s.ErrorCount),
		fmt.Sprintf("%.0f/%.0f", s.Resources.RSSPeakMB, s.Resources.RSSEndMB),
		fmt.Sprintf("%d/%d", s.Resources.GoroutinesPeak, s.Resources.GoroutinesEnd),
		fmt.Sprintf("%.2f/%.2f", s.ServerCPUMSPerTask, s.PostgresCPUMSPerTask),
		commits, wxacts, wal, fpi, fmt.Sprintf("%.1f", s.PollsPerTask), fmt.Sprintf("%.1f", s.Resources.HostLoad))
	if !s.Sustained {
		p.line("       not sustained: %s", s.Verdict)
	}
	if s.ServerAdmission.N > 0 {
		p.line("       server's own time for the POSTs (tollgate_http_request_seconds, bucket-interpolated): p50 %s p95 %s p99 %s",
			msf(s.ServerAdmission.P50), msf(s.ServerAdmission.P95), msf(s.ServerAdmission.P99))
	}
	if s.Tail.Slowest > 0 {
		p.line("       the slowest 1 %% (%d admissions) arrived in %d windows of %g ms; the 3 fullest windows hold %d of them",
			s.Tail.Slowest, s.Tail.Windows, s.Tail.WindowMS, s.Tail.InWorst3)
	}
	if s.SentLate.N > 0 {
		p.line("       tollbench's own delay, arrival due to POST sent: p50 %s p99 %s max %s",
			msf(s.SentLate.P50), msf(s.SentLate.P99), msf(s.SentLate.Max))
	}
	if s.GC.Cycles > 0 {
		p.line("       server's GC: %d cycles, %.1f ms stopped in all", s.GC.Cycles, s.GC.PauseMS)
	}
	if s.Pool.AcquiresPerTask > 0 {
		p.line("       server's connection pool: %.2f connections taken per task, %.3f of them after a wait (none idle), %.3f ms waited per task",
			s.Pool.AcquiresPerTask, s.Pool.WaitsPerTask, s.Pool.WaitMSPerTask)
	}
	if s.AfterVacuum.N > 0 {
		p.line("       first %gs after the ANALYZE before the step (replanning), not recorded: admission p50 %s p99 %s max %s",
			s.AfterVacuumS, msf(s.AfterVacuum.P50), msf(s.AfterVacuum.P99), msf(s.AfterVacuum.Max))
	}
	if s.Shed > 0 {
		p.line("       shed: %d POSTs refused with 503 overloaded (%.1f %% of those sent), answered in p50 %s p99 %s; admitted %d",
			s.Shed, 100*float64(s.Shed)/float64(max(s.Sent, 1)), msf(s.Refusal.P50), msf(s.Refusal.P99), s.Admitted)
	}
	keys := make([]string, 0, len(s.Errors))
	for k := range s.Errors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p.line("       %6d × %s", s.Errors[k], k)
	}
	if s.PG != nil && s.PG.OtherDBCommits > 0 && !s.PG.WALAttributed {
		p.line("       (other databases committed %d transactions meanwhile; WAL/t and wxact/t include their writes)", s.PG.OtherDBCommits)
	}
	if s.PG != nil && s.PG.TasksUpdated > 0 {
		p.line("       task updates: %d, of which HOT (no index entry): %d (%.0f %%)",
			s.PG.TasksUpdated, s.PG.TasksHOTUpdated, 100*float64(s.PG.TasksHOTUpdated)/float64(s.PG.TasksUpdated))
	}
	if len(s.Statements) > 0 {
		p.line("       statements by time (pg_stat_statements):")
	}
	for _, st := range s.Statements {
		p.line("       %8.2f calls/task %9.1f ms %7.3f ms/call  %s", st.CallsPerTask, st.TotalMS, st.MeanMS, st.Query)
	}
}

func (p *printer) summary(r *Report) {
	p.line("\nsummary")
	if c := r.Ceiling; c != nil {
		var wal, fpi float64
		for _, run := range c.Runs {
			if run.Clients == c.BestClients {
				wal, fpi = run.Cost.WALBytesPerTask, run.Cost.WALFPIPerTask
			}
		}
		p.line("  ceiling (pgbench, %s): %.1f tasks/s at %d clients, %s WAL/task (FPI %s)",
			c.Script, c.BestTPS, c.BestClients, bytesIEC(wal), bytesIEC(fpi))
	}
	for _, s := range r.Summary {
		lat := time.Duration(s.ProviderLatencyMS * float64(time.Millisecond))
		if s.TasksPerS == 0 {
			p.line("  model %s: %s", lat, s.Note)
			continue
		}
		ratio := ""
		if s.CeilingRatio > 0 {
			ratio = fmt.Sprintf(" = %.3f of the ceiling", s.CeilingRatio)
		}
		note := ""
		if s.Note != "" {
			note = " (" + s.Note + ")"
		}
		p.line("  model %s: sustained %.1f tasks/s at %g/s offered, admission p99 %.1f ms%s%s",
			lat, s.TasksPerS, s.Rate, s.AdmissionP99MS, ratio, note)
	}
	p.agentSummary(r.Agent)
	p.scenariosSummary(r)
	for _, n := range r.Notes {
		p.line("  note: %s", n)
	}
}

func msf(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.2fs", v/1000)
	}
	return fmt.Sprintf("%.1fms", v)
}

func bytesIEC(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0fB", b)
}
