package bigdata

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// Timing is one usage report asked for several times in a row.
type Timing struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Seconds []float64 `json:"seconds"` // one per run
	MinS    float64   `json:"min_s"`
	MedianS float64   `json:"median_s"`
	MaxS    float64   `json:"max_s"`
	Bytes   int       `json:"bytes"`
	Groups  int       `json:"groups"`
	// Tasks is the report's totals.tasks: the settled rows it summed.
	Tasks int64 `json:"tasks"`
}

// Export is one CSV export and the server's memory while it streamed.
type Export struct {
	Name          string  `json:"name"`
	Path          string  `json:"path"`
	Rows          int64   `json:"rows"` // data rows, without the header
	MB            float64 `json:"mb"`
	FirstByteS    float64 `json:"first_byte_s"`
	Seconds       float64 `json:"seconds"`
	RowsPerSecond float64 `json:"rows_per_s"`
	Memory        *Memory `json:"server_memory,omitempty"`
}

func usageQuery(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q.Encode()
}

// usage asks for the finance reports, each UsageRuns times.
func (m *measurer) usage(ctx context.Context) ([]Timing, error) {
	if m.cfg.FinanceKey == "" {
		return nil, nil
	}
	all := usageQuery("from", m.d.From.Format(time.DateOnly), "to", m.d.To.Add(time.Hour).UTC().Format(time.RFC3339))
	last30 := usageQuery("from", m.d.To.AddDate(0, 0, -30).UTC().Format(time.RFC3339), "to", m.d.To.Add(time.Hour).UTC().Format(time.RFC3339))
	busiest := m.d.Owners[0]
	cases := []struct{ name, path string }{
		{"usage: 30 days, all owners, totals + 1000 rows", "/v1/usage?" + last30},
		{"usage: 30 days, all owners, by model,day", "/v1/usage?" + last30 + "&group_by=model,day"},
		{"usage: 90 days, all owners, by owner,model,day", "/v1/usage?" + all + "&group_by=owner,model,day"},
		{"usage: 90 days, busiest owner, by workload,month", "/v1/usage?" + all + "&owner=" + url.QueryEscape(busiest) + "&group_by=workload,month"},
	}
	var out []Timing
	for _, c := range cases {
		t := Timing{Name: c.name, Path: c.path}
		for range max(m.cfg.UsageRuns, 1) {
			var body bytes.Buffer
			s, err := m.c.get(ctx, m.cfg.FinanceKey, c.path, nil, &body)
			if err != nil {
				return out, fmt.Errorf("bigdata: %s: %w", c.name, err)
			}
			t.Seconds = append(t.Seconds, s.d.Seconds())
			var rep struct {
				Groups []json.RawMessage `json:"groups"`
				Totals struct {
					Tasks int64 `json:"tasks"`
				} `json:"totals"`
			}
			if err := json.Unmarshal(body.Bytes(), &rep); err != nil {
				return out, fmt.Errorf("bigdata: %s: %w", c.name, err)
			}
			t.Bytes, t.Groups, t.Tasks = body.Len(), len(rep.Groups), rep.Totals.Tasks
		}
		t.MinS, t.MedianS, t.MaxS = stats.Spread(t.Seconds)
		fmt.Fprintf(m.w, "  %-50s %d runs: min %6.2f s  median %6.2f s  max %6.2f s  (%d settled rows, %d groups, %d KB)\n",
			t.Name, len(t.Seconds), t.MinS, t.MedianS, t.MaxS, t.Tasks, t.Groups, t.Bytes/1024)
		out = append(out, t)
	}
	return out, nil
}

// exports downloads the CSV for growing windows while sampling the
// server's memory: a streamed export keeps the same peak whatever the
// number of rows.
func (m *measurer) exports(ctx context.Context) ([]Export, error) {
	if m.cfg.FinanceKey == "" {
		return nil, nil
	}
	to := m.d.To.Add(time.Hour).UTC()
	window := func(days int) string {
		return usageQuery("from", to.AddDate(0, 0, -days).Format(time.RFC3339), "to", to.Format(time.RFC3339))
	}
	all := usageQuery("from", m.d.From.Format(time.DateOnly), "to", to.Format(time.RFC3339))
	cases := []struct{ name, path string }{
		{"csv: 1 day, all owners", "/v1/usage.csv?" + window(1)},
		{"csv: 30 days, all owners", "/v1/usage.csv?" + window(30)},
		{"csv: whole history, all owners", "/v1/usage.csv?" + all},
		{"csv: whole history, busiest owner", "/v1/usage.csv?" + all + "&owner=" + url.QueryEscape(m.d.Owners[0])},
	}
	var out []Export
	for _, c := range cases {
		e, err := m.export(ctx, c.name, c.path)
		if err != nil {
			return out, err
		}
		line := fmt.Sprintf("  %-36s %9d rows %8.1f MB  first byte %5.2f s  total %7.2f s  %8.0f rows/s",
			e.Name, e.Rows, e.MB, e.FirstByteS, e.Seconds, e.RowsPerSecond)
		if mem := e.Memory; mem != nil {
			line += fmt.Sprintf("  RSS %.1f MB before, peak %.1f MB (+%.1f)", mem.BaselineMB, mem.PeakMB, mem.PeakMB-mem.BaselineMB)
		}
		fmt.Fprintln(m.w, line)
		out = append(out, e)
	}
	return out, nil
}

func (m *measurer) export(ctx context.Context, name, path string) (Export, error) {
	e := Export{Name: name, Path: path}
	var sampler *memSampler
	if m.cfg.ServerPID > 0 {
		var err error
		if sampler, err = startMemSampler(m.cfg.ServerPID, 20*time.Millisecond); err != nil {
			return e, fmt.Errorf("bigdata: %s: %w", name, err)
		}
	}
	cw := &lineCounter{start: time.Now()}
	s, err := m.c.get(ctx, m.cfg.FinanceKey, path, nil, cw)
	if sampler != nil {
		mem := sampler.stop()
		e.Memory = &mem
	}
	if err != nil {
		return e, fmt.Errorf("bigdata: %s: %w", name, err)
	}
	e.Rows = max(cw.lines-1, 0)
	e.MB = float64(cw.bytes) / (1 << 20)
	e.Seconds = s.d.Seconds()
	if !cw.first.IsZero() {
		e.FirstByteS = cw.first.Sub(cw.start).Seconds()
	}
	if e.Seconds > 0 {
		e.RowsPerSecond = float64(e.Rows) / e.Seconds
	}
	return e, nil
}

// lineCounter counts the bytes and lines written to it, and when the first
// byte came.
type lineCounter struct {
	start, first time.Time
	bytes, lines int64
}

func (c *lineCounter) Write(p []byte) (int, error) {
	if c.first.IsZero() && len(p) > 0 {
		c.first = time.Now()
	}
	c.bytes += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}
