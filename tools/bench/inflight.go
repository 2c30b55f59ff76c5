package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// InFlightConfig is scenario 2: many tasks at once against a slow model.
// Zero values take the defaults.
type InFlightConfig struct {
	Tasks        int           // tasks submitted; default 10000
	ModelLatency time.Duration // the proxy's delay on every model call; default 5s
	Clients      int           // concurrent submitters; default 64
	// Rate paces the arrivals, per second, open loop; 0 submits as fast as
	// the server admits them (each client sends its next POST when the
	// last one is answered).
	Rate float64
	// Timeout bounds the whole scenario from the first arrival: tasks not
	// finished by then are errors. Default 15m.
	Timeout time.Duration
}

func (c *InFlightConfig) defaults() error {
	if c.Tasks <= 0 {
		c.Tasks = 10000
	}
	if c.ModelLatency <= 0 {
		c.ModelLatency = 5 * time.Second
	}
	if c.Clients <= 0 {
		c.Clients = 64
	}
	if c.Rate < 0 || math.IsInf(c.Rate, 0) || math.IsNaN(c.Rate) {
		return fmt.Errorf("bench: in-flight rate %v must be >= 0", c.Rate)
	}
	setDefault(&c.Timeout, 15*time.Minute)
	return nil
}

// InFlightResult is what scenario 2 saw. Times are seconds from the first
// arrival unless said otherwise.
type InFlightResult struct {
	Tasks          int     `json:"tasks"`
	ModelLatencyMS float64 `json:"model_latency_ms"`
	Clients        int     `json:"clients"`
	Rate           float64 `json:"rate,omitempty"` // 0: as fast as admission allows
	Workers        int     `json:"workers,omitempty"`

	Sent      int `json:"sent"`
	Admitted  int `json:"admitted"`
	Succeeded int `json:"succeeded"`
	// Final counts the admitted tasks by the status a GET saw after the
	// drain ("succeeded", "failed", ..., or "unfinished").
	Final      map[string]int `json:"final"`
	ErrorCount int            `json:"error_count"`
	Errors     map[string]int `json:"errors"`

	// Admission is arrival → POST answered; SubmitS is first arrival →
	// last POST answered, AdmittedPerS the rate over that span.
	Admission    stats.Summary `json:"admission"`
	SubmitS      float64       `json:"submit_s"`
	AdmittedPerS float64       `json:"admitted_per_s"`
	// DrainS is the first task's created_at → the last task's
	// finished_at, both by the server's clock; DrainSeenS is when the
	// sampler saw every task counted as finished in the server's metrics.
	DrainS     float64 `json:"drain_s"`
	DrainSeenS float64 `json:"drain_seen_s"`
	// DrainFloorS is the least time the model allows: ceil(tasks/workers)
	// rounds of the model latency (0 when the worker count is unknown).
	DrainFloorS float64 `json:"drain_floor_s,omitempty"`
	// E2EServer is each task's created_at → finished_at: its wait in the
	// queue plus its run.
	E2EServer stats.Summary `json:"e2e_server_clock"`

	// Start is the server before the first arrival; Resources its peaks
	// and last readings over the scenario.
	Start     Baseline  `json:"start"`
	Resources Resources `json:"server"`
	// Peaks over the 1-second samples: unfinished jobs in the queue
	// (tollgate_queue_depth: waiting and running), model calls open at
	// the proxy, the Go heap in use.
	PeakQueueDepth int     `json:"peak_queue_depth"`
	PeakModelCalls int     `json:"peak_model_calls"`
	PeakHeapMB     float64 `json:"peak_heap_mb"`
	// GoroutineBound is what the design allows whatever the number of
	// tasks (see goroutineBound).
	GoroutineBound int `json:"goroutine_bound,omitempty"`

	ServerCPUMSPerTask   float64 `json:"server_cpu_ms_per_task"`
	PostgresCPUMSPerTask float64 `json:"postgres_cpu_ms_per_task"`

	Bounded  bool             `json:"bounded"`
	Verdict  string           `json:"verdict"`
	Limits   []string         `json:"limits"`
	Timeline []InFlightSample `json:"timeline"`
}

// Baseline is the server's state before a scenario's load.
type Baseline struct {
	RSSMB      float64 `json:"rss_mb"`
	Goroutines int     `json:"goroutines"`
	HeapMB     float64 `json:"heap_mb"`
}

// InFlightSample is one scrape of the server during scenario 2.
type InFlightSample struct {
	T          float64 `json:"t_s"`
	Admitted   int     `json:"admitted"`    // POSTs answered 200/202 so far
	Finished   int     `json:"finished"`    // tasks finished since the start, by the server's metrics
	QueueDepth int     `json:"queue_depth"` // unfinished jobs, running ones included; -1 when not read
	ModelCalls int     `json:"model_calls"` // calls open at the proxy
	RSSMB      float64 `json:"rss_mb"`
	HeapMB     float64 `json:"heap_mb"`
	Goroutines int     `json:"goroutines"`
}

// rssTargetMB is the memory target for 10,000 tasks in flight.
const rssTargetMB = 500

// goroutineBound is the most goroutines the server should need with
// workers model calls open and clients connections sending, however many
// tasks wait in the queue: the start; per call slot, four for its model
// call (River's job executor and its stuck-job watcher, or the run on
// arrival, and the HTTP client connection's read and write loops), two for
// a River job fetched while every slot is taken by runs on arrival (it
// waits for one) and one to spare; two per client connection (the
// server's connection goroutine and its background reader); and 100 to
// spare for the pool's and the runtime's own.
func goroutineBound(start, workers, clients int) int {
	return start + 7*workers + 2*clients + 100
}

// metricSeries reads the summed samples the in-flight scenario follows.
// The queue depth is -1 when the scrape lacks it: the server reads it from
// the database and leaves it out when that query fails or times out, which
// is not an empty queue. No finished count is zero: the counter has no
// series before the first task finishes.
func metricSeries(m map[string]float64) (finished, queue, goroutines int, heapMB float64) {
	queue = -1
	if q, ok := m["tollgate_queue_depth"]; ok {
		queue = int(q)
	}
	return int(m["tollgate_tasks_finished_total"]), queue, int(m["go_goroutines"]),
		m["go_memstats_heap_inuse_bytes"] / (1 << 20)
}

// submitted is one POST of scenario 2.
type submitted struct {
	due, answered time.Time
	id            string
	err           string
}

// inFlight runs scenario 2: it submits every task, samples the server
// each second until the server's metrics count them all finished (or the
// timeout), then reads every task once to check how it ended. It returns
// an error only when the server cannot be measured at all.
func (s *stepper) inFlight(ctx context.Context, p *printer) (InFlightResult, error) {
	c := s.cfg.InFlight
	r := InFlightResult{
		Tasks: c.Tasks, ModelLatencyMS: stats.MS(c.ModelLatency), Clients: c.Clients, Rate: c.Rate, Workers: s.cfg.ServerWorkers,
		Final: map[string]int{}, Errors: map[string]int{},
	}
	s.setLatency(c.ModelLatency)
	s.resetUpstream(ctx)
	if err := s.vacuumBefore(ctx, "the in-flight scenario"); err != nil {
		return r, err
	}
	smp := newSampler(s.cfg.ServerPID, s.cfg.BaseURL+"/metrics")
	m0, err := smp.metrics(ctx)
	if err != nil {
		return r, fmt.Errorf("bench: in-flight scenario needs the server's metrics: %w", err)
	}
	finished0, _, g0, heap0 := metricSeries(m0)
	r.Start = Baseline{Goroutines: g0, HeapMB: heap0}
	if s.cfg.ServerPID > 0 {
		r.Start.RSSMB, _ = readRSS(s.cfg.ServerPID)
	} else {
		r.Start.RSSMB = m0["process_resident_memory_bytes"] / (1 << 20)
	}
	if r.Workers > 0 {
		r.DrainFloorS = math.Ceil(float64(c.Tasks)/float64(r.Workers)) * c.ModelLatency.Seconds()
		r.GoroutineBound = goroutineBound(g0, r.Workers, c.Clients)
	}
	before, err := s.readGauges(ctx, nil)
	if err != nil {
		return r, err
	}
	if s.proxy != nil {
		s.proxy.ResetPeak()
	}
	p.line("\nin flight: %d tasks, model latency %s, %d submitters%s; TOLLGATE_WORKERS=%s",
		c.Tasks, c.ModelLatency, c.Clients, rateNote(c.Rate), orUnknown(r.Workers))

	start := time.Now()
	var admitted atomic.Int64
	var submitDone atomic.Bool
	var samples []InFlightSample
	drained := make(chan time.Time, 1)
	smp.onScrape = func(at time.Time, m map[string]float64, res Resources) {
		finished, queue, goroutines, heap := metricSeries(m)
		sm := InFlightSample{
			T: at.Sub(start).Seconds(), Admitted: int(admitted.Load()), Finished: finished - finished0,
			QueueDepth: queue, RSSMB: res.RSSEndMB, HeapMB: heap, Goroutines: goroutines,
		}
		if s.proxy != nil {
			sm.ModelCalls = s.proxy.InFlight()
		}
		samples = append(samples, sm)
		if submitDone.Load() && sm.Finished >= sm.Admitted {
			select {
			case drained <- at:
			default:
			}
		}
	}
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan Resources, 1)
	go func() { sampled <- smp.run(sctx) }()

	subs := s.submitAll(ctx, start, c, &admitted)
	submitDone.Store(true)
	limit := time.NewTimer(time.Until(start.Add(c.Timeout)))
	defer limit.Stop()
	select {
	case at := <-drained:
		r.DrainSeenS = at.Sub(start).Seconds()
	case <-limit.C:
		r.Errors[fmt.Sprintf("not all finished within %s", c.Timeout)]++
	case <-ctx.Done():
	}
	stopSampling()
	r.Resources = <-sampled
	after, err := s.readGauges(ctx, before.pgPIDs)
	if err != nil {
		return r, err
	}
	// samples is complete: the sampler has returned.
	for _, sm := range samples {
		r.PeakQueueDepth = max(r.PeakQueueDepth, sm.QueueDepth)
		r.PeakModelCalls = max(r.PeakModelCalls, sm.ModelCalls)
		r.PeakHeapMB = max(r.PeakHeapMB, sm.HeapMB)
	}
	if s.proxy != nil {
		r.PeakModelCalls = max(r.PeakModelCalls, s.proxy.Peak())
	}
	r.Timeline = samples
	if ctx.Err() != nil {
		return r, ctx.Err()
	}

	tallySubmissions(&r, subs, start)
	views := s.readTasks(ctx, subs, 16)
	tallyFinals(&r, views)
	if after.serverCPU != nil {
		r.ServerCPUMSPerTask = stats.MS(cpuUsed(before.serverCPU, after.serverCPU)) / float64(max(r.Succeeded, 1))
	}
	if s.meter != nil {
		r.PostgresCPUMSPerTask = stats.MS(cpuUsed(before.pgCPU, after.pgCPU)) / float64(max(r.Succeeded, 1))
	}
	r.Bounded, r.Verdict = inFlightVerdict(r)
	r.Limits = inFlightLimits(r)
	return r, nil
}

// submitAll sends c.Tasks POSTs from c.Clients workers, paced at c.Rate
// when it is set, and counts each one admitted as it is answered.
func (s *stepper) submitAll(ctx context.Context, start time.Time, c InFlightConfig, admitted *atomic.Int64) []submitted {
	subs := make([]submitted, c.Tasks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= c.Tasks || ctx.Err() != nil {
					return
				}
				due := time.Now()
				if c.Rate > 0 {
					due = start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
					if sleepUntil(ctx, due) != nil {
						return
					}
				}
				subs[i] = s.submit(ctx, due, fmt.Sprintf("tb-%s-inflight-%d", s.runID, i))
				if subs[i].err == "" {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// The submitters' connections would otherwise idle as server
	// goroutines for the rest of the scenario.
	s.load.http.CloseIdleConnections()
	return subs
}

func (s *stepper) submit(ctx context.Context, due time.Time, key string) submitted {
	resp, err := s.load.send(ctx, apiRequest{method: http.MethodPost, path: "/v1/tasks", idempotencyKey: key})
	answered := time.Now()
	var sub submitted
	switch {
	case err != nil:
		sub.err = "POST: " + err.Error()
	case resp.status != http.StatusAccepted && resp.status != http.StatusOK:
		sub.err = fmt.Sprintf("POST %d %s", resp.status, problemCode(resp.body))
	default:
		sub = submitAnswer(resp)
	}
	sub.due, sub.answered = due, answered
	return sub
}

// submitAnswer reads the task out of a POST's 200 or 202.
func submitAnswer(resp apiResponse) submitted {
	var t taskView
	if json.Unmarshal(resp.body, &t) != nil || t.ID == "" {
		return submitted{err: "POST: unreadable task"}
	}
	return submitted{id: t.ID}
}

// readTasks GETs every admitted task once, from clients workers; a task
// that cannot be read has the zero view with its error as status.
func (s *stepper) readTasks(ctx context.Context, subs []submitted, clients int) []taskView {
	views := make([]taskView, len(subs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(subs) || ctx.Err() != nil {
					return
				}
				if subs[i].id == "" {
					continue
				}
				resp, err := s.load.send(ctx, apiRequest{method: http.MethodGet, path: "/v1/tasks/" + subs[i].id})
				switch {
				case err != nil:
					views[i].Status = "GET: " + err.Error()
				case resp.status != http.StatusOK:
					views[i].Status = fmt.Sprintf("GET %d %s", resp.status, problemCode(resp.body))
				case json.Unmarshal(resp.body, &views[i]) != nil:
					views[i].Status = "GET: unreadable task"
				}
			}
		}()
	}
	wg.Wait()
	s.load.http.CloseIdleConnections()
	return views
}

// tallySubmissions counts the POSTs and times their admission.
func tallySubmissions(r *InFlightResult, subs []submitted, start time.Time) {
	var adm []time.Duration
	var last time.Time
	for _, sub := range subs {
		if sub.due.IsZero() {
			continue // never sent: the run was canceled
		}
		r.Sent++
		if sub.answered.After(last) {
			last = sub.answered
		}
		if sub.err != "" {
			r.Errors[sub.err]++
			continue
		}
		r.Admitted++
		adm = append(adm, sub.answered.Sub(sub.due))
	}
	r.Admission = stats.Summarize(adm)
	if !last.IsZero() {
		r.SubmitS = last.Sub(start).Seconds()
		if r.SubmitS > 0 {
			r.AdmittedPerS = float64(r.Admitted) / r.SubmitS
		}
	}
}

// tallyFinals counts how the admitted tasks ended (views of tasks never
// admitted have no status and no id, and are skipped) and times them by
// the server's clock.
func tallyFinals(r *InFlightResult, views []taskView) {
	var e2e []time.Duration
	var first, last time.Time
	for _, v := range views {
		switch {
		case v.ID == "" && v.Status == "":
			continue
		case v.ID == "":
			r.Final["unread"]++
			r.Errors[v.Status]++
			continue
		case !v.final():
			r.Final["unfinished"]++
			r.Errors["task "+v.Status+" at the end"]++
			continue
		}
		r.Final[v.Status]++
		if v.Status == "succeeded" {
			r.Succeeded++
		} else {
			r.Errors["task "+v.Status]++
		}
		if first.IsZero() || v.CreatedAt.Before(first) {
			first = v.CreatedAt
		}
		if v.FinishedAt != nil {
			e2e = append(e2e, v.FinishedAt.Sub(v.CreatedAt))
			if v.FinishedAt.After(last) {
				last = *v.FinishedAt
			}
		}
	}
	r.E2EServer = stats.Summarize(e2e)
	if !first.IsZero() && last.After(first) {
		r.DrainS = last.Sub(first).Seconds()
	}
	r.ErrorCount = 0
	for _, n := range r.Errors {
		r.ErrorCount += n
	}
}

// inFlightVerdict says whether memory and goroutines stayed bounded: RSS
// under its target, goroutines within what the workers and client
// connections explain (when the worker count is known), and every task
// finished.
func inFlightVerdict(r InFlightResult) (bool, string) {
	var why []string
	if r.Resources.RSSPeakMB >= rssTargetMB {
		why = append(why, fmt.Sprintf("RSS peak %.0f MB >= %d MB", r.Resources.RSSPeakMB, rssTargetMB))
	}
	if r.GoroutineBound > 0 && r.Resources.GoroutinesPeak > r.GoroutineBound {
		why = append(why, fmt.Sprintf("goroutines peak %d > %d (start + 7×workers + 2×clients + 100)", r.Resources.GoroutinesPeak, r.GoroutineBound))
	}
	if r.ErrorCount > 0 {
		why = append(why, fmt.Sprintf("%d errors", r.ErrorCount))
	}
	if len(why) == 0 {
		return true, "bounded"
	}
	return false, strings.Join(why, "; ")
}

// inFlightLimits explains what set the pace of scenario 2, from the
// figures and the 1-second samples.
func inFlightLimits(r InFlightResult) []string {
	var out []string
	lat := time.Duration(r.ModelLatencyMS * float64(time.Millisecond))
	if r.AdmittedPerS > 0 {
		how := fmt.Sprintf("%d clients as fast as admitted", r.Clients)
		if r.Rate > 0 {
			how = fmt.Sprintf("paced at %g/s", r.Rate)
		}
		out = append(out, fmt.Sprintf("admission: %d tasks admitted in %.1f s (%.0f/s, %s; admission p99 %s), so the last could not finish before %.1f s",
			r.Admitted, r.SubmitS, r.AdmittedPerS, how, msf(r.Admission.P99), r.SubmitS+lat.Seconds()))
	}
	if r.DrainS <= 0 {
		return out
	}
	if r.Workers <= 0 {
		return append(out, fmt.Sprintf("drained in %.1f s; the proxy saw at most %d model calls at once (TOLLGATE_WORKERS unknown: pass -workers)", r.DrainS, r.PeakModelCalls))
	}
	out = append(out, fmt.Sprintf("model: at most %d calls at once (TOLLGATE_WORKERS; the proxy saw a peak of %d), so %d tasks need at least ceil(%d/%d) × %s = %.0f s; drained in %.1f s (%.2f × that floor)",
		r.Workers, r.PeakModelCalls, r.Tasks, r.Tasks, r.Workers, lat, r.DrainFloorS, r.DrainS, r.DrainS/r.DrainFloorS))
	busy, waited := workerUse(r.Timeline, r.Workers)
	peakFinish := peakFinishRate(r.Timeline)
	switch {
	case r.PeakModelCalls < r.Workers*9/10:
		out = append(out, fmt.Sprintf("the worker pool never filled (peak %d of %d): admission, River's job fetching or the server's own work paced the starts, not the model", r.PeakModelCalls, r.Workers))
	case waited > 0 && busy < 0.9:
		out = append(out, fmt.Sprintf("while at least %d jobs were unfinished (%d s of samples), only %.0f%% of the workers had a model call open on average: the rest were in Tollgate's own work per task (starting attempts, recording outcomes; finishes peaked at %.0f/s), so the server and PostgreSQL, not the model, stretched the drain",
			r.Workers, waited, 100*busy, peakFinish))
	case r.SubmitS+lat.Seconds() > r.DrainFloorS:
		out = append(out, "admission was slower than the model: the workers waited for submissions")
	default:
		out = append(out, "the worker pool stayed full while work waited: TOLLGATE_WORKERS × the model latency set the drain time; the rest of the tasks waited in PostgreSQL")
	}
	if r.PeakQueueDepth > 0 && r.Resources.GoroutinesPeak > 0 {
		out = append(out, fmt.Sprintf("memory: up to %d jobs unfinished in the queue while the server peaked at %d goroutines and %.0f MB RSS (%.0f MB Go heap), from %d and %.0f MB at the start",
			r.PeakQueueDepth, r.Resources.GoroutinesPeak, r.Resources.RSSPeakMB, r.PeakHeapMB, r.Start.Goroutines, r.Start.RSSMB))
	}
	return out
}

// workerUse is the mean share of workers with a model call open over the
// samples in which at least workers jobs were unfinished (enough work for
// all), and how many such samples there were.
func workerUse(samples []InFlightSample, workers int) (busy float64, n int) {
	if workers <= 0 {
		return 0, 0
	}
	var sum float64
	for _, sm := range samples {
		if sm.QueueDepth >= workers {
			sum += float64(sm.ModelCalls) / float64(workers)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// peakFinishRate is the highest rate, per second, at which the samples saw
// tasks finish over at least a second: samples come about a second apart,
// but a slow scrape followed by a quick one may be much closer.
func peakFinishRate(samples []InFlightSample) float64 {
	var peak float64
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			if dt := samples[j].T - samples[i].T; dt >= 1 {
				peak = max(peak, float64(samples[j].Finished-samples[i].Finished)/dt)
				break
			}
		}
	}
	return peak
}

func rateNote(rate float64) string {
	if rate > 0 {
		return fmt.Sprintf(" paced at %g/s", rate)
	}
	return " as fast as admission allows"
}

func orUnknown(n int) string {
	if n <= 0 {
		return "unknown"
	}
	return strconv.Itoa(n)
}
