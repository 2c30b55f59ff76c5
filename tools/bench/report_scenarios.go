package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// timelineRows picks the samples to print: about max rows, evenly spaced,
// always with the first and the last.
func timelineRows(n, maxRows int) []int {
	if n == 0 {
		return nil
	}
	every := max(1, (n+maxRows-1)/maxRows)
	var out []int
	for i := 0; i < n; i += every {
		out = append(out, i)
	}
	if out[len(out)-1] != n-1 {
		out = append(out, n-1)
	}
	return out
}

const inFlightColumns = "%7s %9s %9s %7s %6s %8s %8s %10s\n"

// inFlight prints scenario 2: its timeline ("?": the scrape had no queue
// depth), its figures, verdict and limits.
func (p *printer) inFlight(r InFlightResult) {
	fmt.Fprintf(p.w, inFlightColumns, "t", "admitted", "finished", "queue", "calls", "rss MB", "heap MB", "goroutines")
	for _, i := range timelineRows(len(r.Timeline), 25) {
		sm := r.Timeline[i]
		queue := "?"
		if sm.QueueDepth >= 0 {
			queue = fmt.Sprint(sm.QueueDepth)
		}
		fmt.Fprintf(p.w, inFlightColumns, fmt.Sprintf("%.1fs", sm.T), fmt.Sprint(sm.Admitted), fmt.Sprint(sm.Finished),
			queue, fmt.Sprint(sm.ModelCalls), fmt.Sprintf("%.0f", sm.RSSMB), fmt.Sprintf("%.0f", sm.HeapMB),
			fmt.Sprint(sm.Goroutines))
	}
	p.line("  sent %d, admitted %d in %.1f s (%.0f/s); admission p50 %s p95 %s p99 %s max %s",
		r.Sent, r.Admitted, r.SubmitS, r.AdmittedPerS, msf(r.Admission.P50), msf(r.Admission.P95), msf(r.Admission.P99), msf(r.Admission.Max))
	floor := ""
	if r.DrainFloorS > 0 {
		floor = fmt.Sprintf("; the model's floor is %.0f s", r.DrainFloorS)
	}
	p.line("  drained in %.1f s (first created → last finished, server clock; the metrics showed all finished at %.0f s)%s",
		r.DrainS, r.DrainSeenS, floor)
	p.line("  per task, created → finished (server clock): p50 %s p95 %s p99 %s max %s",
		msf(r.E2EServer.P50), msf(r.E2EServer.P95), msf(r.E2EServer.P99), msf(r.E2EServer.Max))
	bound := ""
	if r.GoroutineBound > 0 {
		bound = fmt.Sprintf(" (bound %d)", r.GoroutineBound)
	}
	p.line("  server: RSS %.0f → peak %.0f → %.0f MB (target < %d MB); goroutines %d → peak %d%s → %d; Go heap peak %.0f MB; peak queue %d jobs, peak model calls %d",
		r.Start.RSSMB, r.Resources.RSSPeakMB, r.Resources.RSSEndMB, rssTargetMB, r.Start.Goroutines, r.Resources.GoroutinesPeak, bound,
		r.Resources.GoroutinesEnd, r.PeakHeapMB, r.PeakQueueDepth, r.PeakModelCalls)
	p.line("  cpu ms/task: server %.2f, Postgres %.2f; host load %.1f", r.ServerCPUMSPerTask, r.PostgresCPUMSPerTask, r.Resources.HostLoad)
	p.line("  final statuses: %s", counts(r.Final))
	p.errors(r.Errors)
	p.line("  verdict: %s", r.Verdict)
	for _, l := range r.Limits {
		p.line("  limit: %s", l)
	}
}

func (p *printer) duplicatesHeader(r DuplicatesResult, c DuplicatesConfig) {
	p.line("duplicates: %d tasks created in %.1f s, %d of them finished (a replay of a finished task answers 200, of an unfinished one 202)",
		r.Keys, r.SetupS, r.SetupFinished)
	p.errors(r.SetupErrors)
	p.line("each run: %s of closed-loop requests measured after %s of warm-up", c.Duration, max(c.Warmup, 0))
	fmt.Fprintf(p.w, duplicatesColumns, "kind", "clients", "req/s", "p50", "p95", "p99", "max", "errs",
		"rss pk", "gor pk", "ms/req srv/pg/tb", "CPUs srv/pg/tb/other", "busy", "commit/r", "wxact/r", "WAL/r")
}

const duplicatesColumns = "%-11s %7s | %8s %7s %7s %7s %7s | %5s | %6s %6s | %16s %20s %5s | %8s %7s %7s\n"

func (p *printer) duplicatesRun(r DuplicatesRun) {
	commits, wxacts, wal := "-", "-", "-"
	if r.PG != nil {
		commits = fmt.Sprintf("%.2f", r.PG.CommitsPerTask)
		wxacts = fmt.Sprintf("%.2f", r.PG.WriteXactsPerTask)
		wal = bytesIEC(r.PG.WALBytesPerTask)
	}
	c, l := r.CPU, r.Calls.Latency
	fmt.Fprintf(p.w, duplicatesColumns, r.Kind, fmt.Sprint(r.Clients),
		fmt.Sprintf("%.0f", r.Calls.PerS), msf(l.P50), msf(l.P95), msf(l.P99), msf(l.Max), fmt.Sprint(r.Calls.ErrorCount),
		fmt.Sprintf("%.0f", r.Resources.RSSPeakMB), fmt.Sprint(r.Resources.GoroutinesPeak),
		fmt.Sprintf("%.2f/%.2f/%.2f", c.ServerMSPerReq, c.PostgresMSPerReq, c.ClientMSPerReq),
		fmt.Sprintf("%.2f/%.2f/%.2f/%.2f", c.Server, c.Postgres, c.Client, c.Other),
		fmt.Sprintf("%.0f%%", 100*c.HostBusy), commits, wxacts, wal)
	p.line("       statuses: %s", counts(r.Calls.Statuses))
	if r.TargetPerS > 0 {
		verdict := "met"
		if !r.MetTarget {
			verdict = "NOT met"
		}
		p.line("       target >= %.0f/s without errors: %s", r.TargetPerS, verdict)
	}
	p.errors(r.Calls.Errors)
	p.line("       limit: %s", r.Limit)
	switch {
	case r.Profile != "":
		p.line("       server CPU profile: go tool pprof -top <the tollgate binary> %s", r.Profile)
	case r.ProfileError != "":
		p.line("       no server CPU profile: %s", r.ProfileError)
	}
	for _, st := range r.Statements {
		p.line("       %8.2f calls/req %9.1f ms %7.3f ms/call  %s", st.CallsPerTask, st.TotalMS, st.MeanMS, st.Query)
	}
}

// scenariosSummary adds the in-flight and duplicates lines to the summary.
func (p *printer) scenariosSummary(r *Report) {
	if f := r.InFlight; f != nil {
		p.line("  in flight: %d tasks at a %s model: %d succeeded, drained in %.1f s (floor %.0f s); RSS peak %.0f MB, goroutines peak %d (from %d): %s",
			f.Tasks, time.Duration(f.ModelLatencyMS*float64(time.Millisecond)), f.Succeeded, f.DrainS, f.DrainFloorS,
			f.Resources.RSSPeakMB, f.Resources.GoroutinesPeak, f.Start.Goroutines, f.Verdict)
	}
	if d := r.Duplicates; d != nil {
		for _, run := range d.Runs {
			target := ""
			if run.TargetPerS > 0 {
				target = fmt.Sprintf(" (target %.0f/s: %s)", run.TargetPerS, map[bool]string{true: "met", false: "not met"}[run.MetTarget])
			}
			p.line("  %s × %d clients: %.0f/s, p50 %s p99 %s, %d errors%s; CPUs %.0f%% busy, projected %.0f/s",
				run.Kind, run.Clients, run.Calls.PerS, msf(run.Calls.Latency.P50), msf(run.Calls.Latency.P99),
				run.Calls.ErrorCount, target, 100*run.CPU.HostBusy, run.CPU.ProjectedPerS)
		}
	}
}

// errors prints error counts, the commonest first.
func (p *printer) errors(errs map[string]int) {
	keys := slices.Sorted(maps.Keys(errs))
	slices.SortStableFunc(keys, func(a, b string) int { return errs[b] - errs[a] })
	for _, k := range keys {
		p.line("       %6d × %s", errs[k], k)
	}
}

// counts formats a count map as "a 3, b 1", in key order; "-" when empty.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
