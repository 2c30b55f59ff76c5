package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// labelNote is printed with every table and stored in peer.json: the two
// gateways do different work, and the figures must not be read otherwise.
const labelNote = "Portkey is a stateless proxy: it forwards the call and stores nothing. " +
	"Tollgate commits durable state per task (task, reservation, job, settlement, replay record) before it answers."

// report is tools/bench/results/peer.json.
type report struct {
	Note      string            `json:"note"`
	StartedAt time.Time         `json:"started_at"`
	Machine   machine           `json:"machine"`
	Versions  map[string]string `json:"versions"`
	Settings  settings          `json:"settings"`
	Phases    []phase           `json:"phases"`
}

type machine struct {
	CPUs          int    `json:"cpus"`
	OS            string `json:"os"`
	LoadAvgBefore string `json:"loadavg_before"` // /proc/loadavg: others share the machine
	LoadAvgAfter  string `json:"loadavg_after"`
}

type settings struct {
	Model      string  `json:"model"`
	Warmup     int     `json:"warmup_per_target"`
	Sequential int     `json:"sequential_requests"`
	Rate       float64 `json:"open_loop_rate_per_s"`
	Duration   string  `json:"open_loop_duration"`
	Upstream   string  `json:"upstream"`
}

// phase is one load shape run against every target in turn.
type phase struct {
	Name     string         `json:"name"`
	Title    string         `json:"title"`
	Detail   string         `json:"detail"`
	Rate     float64        `json:"rate_per_s,omitempty"`
	Duration string         `json:"duration,omitempty"`
	Targets  []targetResult `json:"targets"`
	Added    []added        `json:"added_over_fake"`
}

type targetResult struct {
	Name          string   `json:"name"`
	Label         string   `json:"label"`
	Summary       summary  `json:"latency"`
	UpstreamCalls int      `json:"upstream_calls"`      // calls the fake received during the run
	BySecond      []second `json:"by_second,omitempty"` // open loop only
}

func newReport(c config) report {
	return report{
		Note:      labelNote,
		StartedAt: time.Now().UTC().Truncate(time.Second),
		Machine:   machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadAvgBefore: stats.LoadAverages()},
		Versions:  c.Versions,
		Settings: settings{Model: c.Model, Warmup: c.Warmup, Sequential: c.Sequential, Rate: c.Rate, Duration: c.Duration.String(),
			Upstream: "tollgate fakeprovider, 0 ms, deterministic OpenAI-compatible answers"},
	}
}

// addedLatency is each gateway's latency over the fake called directly in
// the same phase; it is empty when the phase has no "fake" result.
func addedLatency(rs []targetResult) []added {
	var direct *summary
	for i := range rs {
		if rs[i].Name == "fake" {
			direct = &rs[i].Summary
		}
	}
	if direct == nil {
		return nil
	}
	var out []added
	for _, r := range rs {
		if r.Name != "fake" {
			out = append(out, addedOver(r.Label, r.Summary, *direct))
		}
	}
	return out
}

// print writes the tables: latencies per phase and target, then the
// latency each gateway adds.
func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "\nOne chat completion against the fake model (0 ms), milliseconds, %d CPUs, load %s -> %s\n",
		r.Machine.CPUs, r.Machine.LoadAvgBefore, r.Machine.LoadAvgAfter)
	for _, line := range strings.SplitAfter(labelNote, ". ") {
		fmt.Fprintln(w, "  "+strings.TrimSpace(line))
	}
	fmt.Fprintln(w)
	lat := stats.NewTable("load", "target", "ok", "errors", "p50", "p90", "p99", "max", "answers/s", "upstream calls")
	for _, p := range r.Phases {
		for _, t := range p.Targets {
			s := t.Summary
			lat.Rowf("%s\t%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t%d",
				p.Title, t.Label, s.N, s.Errors, s.P50, s.P90, s.P99, s.Max, s.PerSecond, t.UpstreamCalls)
		}
	}
	lat.Names = 2
	_ = lat.Write(w, "")
	fmt.Fprintln(w, "\nAdded latency over the fake called directly (difference of percentiles, ms)")
	add := stats.NewTable("load", "gateway", "+p50", "+p99")
	for _, p := range r.Phases {
		for _, a := range p.Added {
			add.Rowf("%s\t%s\t%+.3f\t%+.3f", p.Title, a.Gateway, a.P50, a.P99)
		}
	}
	add.Names = 2
	_ = add.Write(w, "")
	for _, p := range r.Phases {
		if len(p.Targets) == 0 || p.Targets[0].BySecond == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s, p50 of the requests due in each second (ms), first second first\n", p.Title)
		seconds := &stats.Table{Names: 2}
		for _, t := range p.Targets {
			p50s := make([]string, len(t.BySecond))
			for i, s := range t.BySecond {
				p50s[i] = fmt.Sprintf("%.1f", s.P50)
			}
			seconds.Row(t.Label, strings.Join(p50s, " "))
		}
		_ = seconds.Write(w, "")
	}
	for _, p := range r.Phases {
		for _, t := range p.Targets {
			if t.Summary.Errors > 0 {
				fmt.Fprintf(w, "\n%s, %s: %d errors, first: %s\n", p.Title, t.Label, t.Summary.Errors, t.Summary.FirstErr)
			}
		}
	}
}
