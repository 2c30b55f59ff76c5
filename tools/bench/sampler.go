package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// Resources is what the server process used during a step.
type Resources struct {
	RSSPeakMB      float64 `json:"rss_peak_mb"`
	RSSEndMB       float64 `json:"rss_end_mb"`
	GoroutinesPeak int     `json:"goroutines_peak"`
	GoroutinesEnd  int     `json:"goroutines_end"`
	// HostLoad is the machine's 1-minute load average at the end of the
	// step: on a shared machine, what else competed for the CPUs.
	HostLoad float64 `json:"host_load"`
	// RSSSource says where RSS came from: "/proc/PID/status" or, without
	// a pid, the server's process_resident_memory_bytes metric.
	RSSSource string `json:"rss_source"`
}

// sampler watches the server: RSS from /proc/PID/status (cheap, so often)
// and goroutines from its /metrics (a scrape runs the server's database
// collectors, so once a second, and that cost is part of the step).
type sampler struct {
	pid         int
	metricsURL  string
	client      *http.Client
	rssEvery    time.Duration
	scrapeEvery time.Duration
	// onScrape, when set, sees every successful scrape: its time, the
	// metrics (see parseMetrics) and the readings so far. It runs on the
	// sampler's goroutine.
	onScrape func(at time.Time, m map[string]float64, r Resources)
}

func newSampler(pid int, metricsURL string) *sampler {
	return &sampler{
		pid: pid, metricsURL: metricsURL,
		client:   &http.Client{Timeout: 5 * time.Second},
		rssEvery: 100 * time.Millisecond, scrapeEvery: time.Second,
	}
}

// run samples until ctx ends and returns the peaks and the last readings.
// A reading that fails is skipped: a missing sample must not fail a step.
func (s *sampler) run(ctx context.Context) Resources {
	var r Resources
	r.RSSSource = "metrics process_resident_memory_bytes"
	if s.pid > 0 {
		r.RSSSource = fmt.Sprintf("/proc/%d/status VmRSS", s.pid)
	}
	rssTick := time.NewTicker(s.rssEvery)
	defer rssTick.Stop()
	scrapeTick := time.NewTicker(s.scrapeEvery)
	defer scrapeTick.Stop()
	s.rss(&r)
	s.scrape(ctx, &r)
	for {
		select {
		case <-ctx.Done():
			// One last reading, after the step, on a fresh context.
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.rss(&r)
			s.scrape(fctx, &r)
			cancel()
			r.HostLoad = stats.LoadAverage()
			return r
		case <-rssTick.C:
			s.rss(&r)
		case <-scrapeTick.C:
			s.scrape(ctx, &r)
		}
	}
}

func (s *sampler) rss(r *Resources) {
	if s.pid <= 0 {
		return
	}
	mb, err := readRSS(s.pid)
	if err != nil {
		return
	}
	r.RSSEndMB = mb
	r.RSSPeakMB = max(r.RSSPeakMB, mb)
}

func (s *sampler) scrape(ctx context.Context, r *Resources) {
	m, err := s.metrics(ctx)
	if err != nil {
		return
	}
	if g, ok := m["go_goroutines"]; ok {
		r.GoroutinesEnd = int(g)
		r.GoroutinesPeak = max(r.GoroutinesPeak, int(g))
	}
	if s.pid <= 0 {
		if b, ok := m["process_resident_memory_bytes"]; ok {
			r.RSSEndMB = b / (1 << 20)
			r.RSSPeakMB = max(r.RSSPeakMB, r.RSSEndMB)
		}
	}
	if s.onScrape != nil {
		s.onScrape(time.Now(), m, *r)
	}
}

// metrics scrapes the unlabelled samples of a Prometheus text exposition.
func (s *sampler) metrics(ctx context.Context) (map[string]float64, error) {
	body, err := scrapeMetrics(ctx, s.client, s.metricsURL)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body), nil
}

// scrapeMetrics returns the server's Prometheus text exposition.
func scrapeMetrics(ctx context.Context, client *http.Client, metricsURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: %s: %s", metricsURL, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// parseMetrics returns each metric of a Prometheus text exposition with
// its value summed over its label sets: a metric without labels as it is,
// tollgate_queue_depth{provider_key=...} as the depth of every queue
// together. Sums mean something for counters and gauges only; they are what
// the samplers read. Comments and unparseable lines are skipped.
func parseMetrics(body []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var name, val string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			// Label values may hold spaces; the value follows the last '}'.
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, val = line[:i], line[j+1:]
		} else {
			var ok bool
			if name, val, ok = strings.Cut(line, " "); !ok {
				continue
			}
		}
		val, _, _ = strings.Cut(strings.TrimSpace(val), " ") // drop a timestamp
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] += f
		}
	}
	return out
}

// readRSS returns a process's resident set in MiB, from VmRSS in
// /proc/PID/status.
func readRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("bench: /proc/%d/status: VmRSS %q", pid, v)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("bench: /proc/%d/status has no VmRSS", pid)
}
