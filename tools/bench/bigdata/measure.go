package bigdata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MeasureConfig is one measurement run against a serving Tollgate whose
// database holds a seeded history.
type MeasureConfig struct {
	BaseURL string
	// SupportKey searches and opens any owner's records (audited);
	// ClientKey is a client key of ClientOwner, reading its own; FinanceKey
	// reads usage. A scenario whose key is empty is skipped.
	SupportKey, ClientKey, FinanceKey string
	ClientOwner                       string
	Concurrency                       int
	Lookups                           int // replay lookups per lookup scenario
	Searches                          int // requests per search scenario
	UsageRuns                         int // runs of each usage report
	// RequestTimeout cuts one lookup or search (counted as an error);
	// ScenarioBudget stops a search scenario from starting requests after
	// this long. Both keep a run over a slow build finite.
	RequestTimeout, ScenarioBudget time.Duration
	CSV                            bool
	ServerPID                      int // for memory during the CSV export; 0 skips it
	Seed                           uint64
}

// Results is everything a measurement found.
type Results struct {
	Data   Dataset   `json:"dataset"`
	Lookup []Latency `json:"lookup"`
	Search []Latency `json:"search"`
	Usage  []Timing  `json:"usage"`
	CSV    []Export  `json:"csv"`
}

// Dataset is what the measurement found in the database: the window the
// history spans and the samples it draws requests from.
type Dataset struct {
	Tasks         int64     `json:"tasks"`
	ReplayRecords int64     `json:"replay_records"`
	UsageRecords  int64     `json:"usage_records"`
	LedgerRows    int64     `json:"ledger_rows"`
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	Owners        []string  `json:"owners"` // busiest first
	ids           []string
	keys          []string
	ownIDs        []string
}

// Discover reads the dataset's extent and draws random samples of task ids
// (uniform over the whole table, so most lookups miss Postgres's buffer
// cache and hit the OS page cache or the disk, as support's would), of
// idempotency keys, and of the client owner's own task ids.
func Discover(ctx context.Context, pool *pgxpool.Pool, clientOwner string, n int) (Dataset, error) {
	var d Dataset
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM replay_records),
		(SELECT count(*) FROM usage_records), (SELECT count(*) FROM budget_ledger),
		(SELECT min(created_at) FROM tasks), (SELECT max(created_at) FROM tasks)`).
		Scan(&d.Tasks, &d.ReplayRecords, &d.UsageRecords, &d.LedgerRows, &d.From, &d.To)
	if err != nil {
		return d, fmt.Errorf("bigdata: discover: %w", err)
	}
	if d.Tasks == 0 {
		return d, errors.New("bigdata: discover: the database holds no tasks; seed it first")
	}
	rows, err := pool.Query(ctx, `SELECT owner_id FROM tasks TABLESAMPLE SYSTEM (1) GROUP BY 1 ORDER BY count(*) DESC, 1`)
	if err != nil {
		return d, fmt.Errorf("bigdata: discover owners: %w", err)
	}
	if d.Owners, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return d, fmt.Errorf("bigdata: discover owners: %w", err)
	}
	pct := min(100, 300*float64(n)/float64(d.Tasks))
	rows, err = pool.Query(ctx, `SELECT id::text, idempotency_key FROM tasks TABLESAMPLE BERNOULLI ($1) ORDER BY random() LIMIT $2`, pct, n)
	if err != nil {
		return d, fmt.Errorf("bigdata: discover ids: %w", err)
	}
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			return d, fmt.Errorf("bigdata: discover ids: %w", err)
		}
		d.ids, d.keys = append(d.ids, id), append(d.keys, key)
	}
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("bigdata: discover ids: %w", err)
	}
	if clientOwner != "" {
		rows, err = pool.Query(ctx, `SELECT id::text FROM tasks TABLESAMPLE BERNOULLI ($1) WHERE owner_id = $2 ORDER BY random() LIMIT $3`,
			min(100, pct*float64(max(len(d.Owners), 1))), clientOwner, n)
		if err != nil {
			return d, fmt.Errorf("bigdata: discover own ids: %w", err)
		}
		if d.ownIDs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return d, fmt.Errorf("bigdata: discover own ids: %w", err)
		}
	}
	if len(d.ids) == 0 {
		return d, errors.New("bigdata: discover: the sample of task ids came back empty")
	}
	return d, nil
}

// Measure runs every scenario in turn and returns what it found. Progress
// lines go to w as scenarios finish.
func Measure(ctx context.Context, cfg MeasureConfig, d Dataset, w io.Writer) (*Results, error) {
	if cfg.Concurrency < 1 {
		return nil, errors.New("bigdata: concurrency must be at least 1")
	}
	m := &measurer{cfg: cfg, d: d, c: newClient(cfg.BaseURL, cfg.Concurrency), rnd: rand.New(rand.NewPCG(cfg.Seed, 9)), w: w}
	res := &Results{Data: d}
	res.Lookup = m.lookups(ctx)
	res.Search = m.searches(ctx)
	var err error
	if res.Usage, err = m.usage(ctx); err != nil {
		return res, err
	}
	if cfg.CSV {
		if res.CSV, err = m.exports(ctx); err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

type measurer struct {
	cfg MeasureConfig
	d   Dataset
	c   *client
	rnd *rand.Rand // used only while building requests, before the load starts
	w   io.Writer
}

func (m *measurer) report(l Latency) Latency {
	s := l.Summary
	fmt.Fprintf(m.w, "  %-48s c=%-2d n=%-6d p50 %7.2f  p95 %7.2f  p99 %7.2f  max %8.2f ms  %7.1f req/s  errors %d (timed out %d, skipped %d)\n",
		l.Name, l.Concurrency, s.N, s.P50, s.P95, s.P99, s.Max, l.PerSecond, l.Errors, l.TimedOut, l.Skipped)
	if l.ErrorSample != "" {
		fmt.Fprintf(m.w, "    first error: %s\n", l.ErrorSample)
	}
	return l
}

// answered: a found record (200) or an erased one's tombstone (410) are
// both answers.
func answered(status int) bool { return status == http.StatusOK || status == http.StatusGone }
func okOnly(status int) bool   { return status == http.StatusOK }

// lookups opens random records: as support (with X-Reason, so every read
// is audited: one INSERT and its commit per lookup) and as their owner;
// each with one client (the latency of one lookup on an idle server) and
// with Concurrency clients (the server saturated: latency is then mostly
// waiting for a CPU).
func (m *measurer) lookups(ctx context.Context) []Latency {
	var out []Latency
	n := m.cfg.Lookups
	warm := min(500, n/10)
	reason := http.Header{"X-Reason": {"ticket 4711: customer disputes the answer"}}
	type who struct {
		name, key string
		header    http.Header
		ids       []string
	}
	var list []who
	if m.cfg.SupportKey != "" {
		list = append(list, who{"lookup: support, any owner (audited)", m.cfg.SupportKey, reason, m.d.ids})
	}
	if m.cfg.ClientKey != "" && len(m.d.ownIDs) > 0 {
		list = append(list, who{"lookup: owner's own record", m.cfg.ClientKey, nil, m.d.ownIDs})
	}
	concs := []int{1}
	if m.cfg.Concurrency > 1 {
		concs = append(concs, m.cfg.Concurrency)
	}
	for _, w := range list {
		for _, conc := range concs {
			l := load{name: w.name, example: "/v1/tasks/" + w.ids[0] + "/replay", n: n, warm: warm, conc: conc,
				ok: answered, timeout: m.cfg.RequestTimeout}
			out = append(out, m.report(runLoad(ctx, l, func(ctx context.Context, i int) ([]sample, error) {
				s, err := m.c.get(ctx, w.key, "/v1/tasks/"+w.ids[i%len(w.ids)]+"/replay", w.header, nil)
				return []sample{s}, err
			})))
		}
	}
	return out
}

// searchScenario is one kind of support search: its requests' paths, one
// per request, drawn up front.
type searchScenario struct {
	name  string
	key   string
	paths []string
	pages int // > 1: follow next_cursor this many pages per request
}

// searchScenarios draws the requests of every search scenario.
func (m *measurer) searchScenarios() []searchScenario {
	n := m.cfg.Searches
	top := m.d.Owners[:min(10, len(m.d.Owners))]
	span := m.d.To.Sub(m.d.From)
	week := 7 * 24 * time.Hour
	pick := func(list []string) string { return list[m.rnd.IntN(len(list))] }
	window := func(q url.Values) url.Values {
		from := m.d.From.Add(time.Duration(m.rnd.Int64N(int64(max(span-week, time.Hour)))))
		q.Set("from", from.UTC().Format(time.RFC3339))
		q.Set("to", from.Add(week).UTC().Format(time.RFC3339))
		return q
	}
	gen := func(f func(i int) url.Values) []string {
		out := make([]string, n)
		for i := range out {
			q := f(i)
			out[i] = "/v1/replays"
			if len(q) > 0 {
				out[i] += "?" + q.Encode()
			}
		}
		return out
	}
	vals := func(kv ...string) url.Values {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	sup := m.cfg.SupportKey
	list := []searchScenario{
		{name: "search: newest, no filter", key: sup, paths: gen(func(int) url.Values { return nil })},
		{name: "search: owner + 7-day window", key: sup, paths: gen(func(int) url.Values { return window(vals("owner", pick(top))) })},
		{name: "search: model + 7-day window", key: sup, paths: gen(func(int) url.Values { return window(vals("model", pick(Models()))) })},
		{name: "search: status=failed", key: sup, paths: gen(func(int) url.Values { return vals("status", "failed") })},
		{name: "search: owner + status=canceled", key: sup, paths: gen(func(int) url.Values { return vals("owner", pick(top), "status", "canceled") })},
		{name: "search: q=common word (1 in 16)", key: sup, paths: gen(func(int) url.Values { return vals("q", pick(commonWords)) })},
		{name: "search: q=topic word (1 in 64)", key: sup, paths: gen(func(int) url.Values { return vals("q", pick(topicWords)) })},
		{name: "search: q=item code (~1 in 20k)", key: sup, paths: gen(func(int) url.Values { return vals("q", SKU(m.rnd.IntN(skuCount))) })},
		{name: "search: q=order number (unique)", key: sup, paths: gen(func(i int) url.Values {
			return vals("q", orderOfKey(m.d.keys[i%len(m.d.keys)]))
		})},
		{name: "search: q=idempotency key", key: sup, paths: gen(func(i int) url.Values { return vals("q", m.d.keys[i%len(m.d.keys)]) })},
		{name: "search: q=task id", key: sup, paths: gen(func(i int) url.Values { return vals("q", m.d.ids[i%len(m.d.ids)]) })},
		{name: "search: owner + q=common word", key: sup, paths: gen(func(int) url.Values { return vals("owner", pick(top), "q", pick(commonWords)) })},
		{name: "search: owner, 5 pages by cursor (per page)", key: sup, pages: 5, paths: gen(func(int) url.Values { return vals("owner", pick(top)) })},
		{name: "search: client, own records, newest", key: m.cfg.ClientKey, paths: gen(func(int) url.Values { return nil })},
	}
	return slices.DeleteFunc(list, func(s searchScenario) bool { return s.key == "" })
}

// orderOfKey returns the order number in a seeded idempotency key
// ("order-100042-reply" → "100042"), or the key itself.
func orderOfKey(key string) string {
	var n int64
	if _, err := fmt.Sscanf(key, "order-%d-reply", &n); err == nil {
		return fmt.Sprint(n)
	}
	return key
}

func (m *measurer) searches(ctx context.Context) []Latency {
	var out []Latency
	for _, sc := range m.searchScenarios() {
		warm := min(20, len(sc.paths)/10)
		paths := sc.paths
		l := runLoad(ctx, load{name: sc.name, example: paths[0], n: len(paths) - warm, warm: warm, conc: m.cfg.Concurrency,
			ok: okOnly, timeout: m.cfg.RequestTimeout, budget: m.cfg.ScenarioBudget},
			func(ctx context.Context, i int) ([]sample, error) { return m.page(ctx, sc.key, paths[i], sc.pages) })
		out = append(out, m.report(l))
	}
	return out
}

// page fetches path and follows next_cursor until pages pages were read or
// the listing ends.
func (m *measurer) page(ctx context.Context, key, path string, pages int) ([]sample, error) {
	var out []sample
	for p := 0; p < max(pages, 1); p++ {
		var body bytes.Buffer
		s, err := m.c.get(ctx, key, path, nil, &body)
		out = append(out, s)
		if err != nil || pages <= 1 {
			return out, err
		}
		var list struct {
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body.Bytes(), &list); err != nil {
			return out, fmt.Errorf("GET %s: %w", path, err)
		}
		if list.NextCursor == nil {
			return out, nil
		}
		u, err := url.Parse(path)
		if err != nil {
			return out, err
		}
		q := u.Query()
		q.Set("cursor", *list.NextCursor)
		u.RawQuery = q.Encode()
		path = u.String()
	}
	return out, nil
}
