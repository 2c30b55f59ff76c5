package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/logsafe"
	"github.com/tollgate/tollgate/webhooks"
)

// providersForLog lists provider keys without their credentials.
func providersForLog(c *catalog.Catalog) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, p := range c.Providers {
		out = append(out, fmt.Sprintf("%s(%s, %s, key set: %v)", p.Key, p.Kind, logsafe.URL(p.BaseURL), p.APIKey != ""))
	}
	return out
}

// config is every setting of `tollgate serve`, read once from the
// environment and logged at start-up with secrets masked.
type config struct {
	DatabaseURL      string
	Addr             string
	Migrate          bool
	ModelBaseURL     string
	ModelAPIKey      string
	ModelName        string
	RequestTimeout   time.Duration
	MaxBodyBytes     int64
	MaxAttempts      int
	DefaultMaxTokens int
	Workers          int
	MaxAdmitting     int           // 0: no bound
	MaxAdmissionWait time.Duration // past MaxAdmitting
	ShedQueueWait    time.Duration // 0: never
	RescueAfter      time.Duration
	SyncWait         time.Duration
	DrainTimeout     time.Duration
	// DrainDelay is how long a stopping serve keeps its listener open,
	// /readyz answering 503, before it stops accepting requests: a load
	// balancer or a Kubernetes readiness probe needs that long to see the
	// drain and send no more.
	DrainDelay    time.Duration
	HeaderTimeout time.Duration
	PricesSpec    string
	PricesFile    string // TOLLGATE_PRICES_FILE: a price list in LiteLLM's format, "none", or "embedded" for the built-in one
	PriceModels   int    // the models the price list gives
	PassThrough   bool   // TOLLGATE_PASS_THROUGH=on: with a price list, unknown names still pass through
	ConfigFile    string
	Catalog       *catalog.Catalog
	MetricsAddr   string // TOLLGATE_METRICS_ADDR: /metrics on a listener of its own
	MetricsToken  string // TOLLGATE_METRICS_TOKEN: the bearer token /metrics requires
	FakeAddr      string // TOLLGATE_FAKE_ADDR: where the in-process fake provider listens
	// WebhookAllow are the addresses every webhook may reach
	// (TOLLGATE_WEBHOOK_ALLOW), private or refused ones included.
	WebhookAllow []netip.Prefix
	// FailureReplayWindow: a call without an Idempotency-Key repeating
	// one that failed this recently gets that failure again; 0: never.
	FailureReplayWindow time.Duration
}

const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable"
	defaultAddr        = "127.0.0.1:8080"
	defaultModel       = "gpt-4o-mini"
	// defaultPrices are list prices in micro-units per million tokens.
	defaultPrices = "gpt-4o-mini=150000:600000,gpt-4o=2500000:10000000,gpt-4.1-mini=400000:1600000"
)

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		DatabaseURL:  orDefault(getenv("DATABASE_URL"), defaultDatabaseURL),
		Addr:         orDefault(getenv("TOLLGATE_ADDR"), defaultAddr),
		Migrate:      getenv("TOLLGATE_MIGRATE") != "off",
		ModelBaseURL: getenv("MODEL_BASE_URL"),
		ModelAPIKey:  getenv("MODEL_API_KEY"),
		ModelName:    orDefault(getenv("MODEL_NAME"), defaultModel),
		PricesSpec:   orDefault(getenv("TOLLGATE_PRICES"), defaultPrices),
		MetricsAddr:  getenv("TOLLGATE_METRICS_ADDR"),
		MetricsToken: getenv("TOLLGATE_METRICS_TOKEN"),
		FakeAddr:     orDefault(getenv("TOLLGATE_FAKE_ADDR"), "127.0.0.1:0"),
	}
	var err error
	mb, err := intVar(getenv, "TOLLGATE_MAX_BODY_BYTES", 1<<20, 1024, 64<<20)
	if err != nil {
		return c, err
	}
	c.MaxBodyBytes = int64(mb)
	if c.MaxAttempts, err = intVar(getenv, "TOLLGATE_MAX_ATTEMPTS", 4, 1, 50); err != nil {
		return c, err
	}
	if c.DefaultMaxTokens, err = intVar(getenv, "TOLLGATE_DEFAULT_MAX_TOKENS", 1024, 1, 1_000_000); err != nil {
		return c, err
	}
	if c.Workers, err = intVar(getenv, "TOLLGATE_WORKERS", 100, 1, 10_000); err != nil {
		return c, err
	}
	if c.MaxAdmitting, err = intVar(getenv, "TOLLGATE_MAX_ADMITTING", 64, 0, 1_000_000); err != nil {
		return c, err
	}
	if err := c.readDurations(getenv); err != nil {
		return c, err
	}
	c.HeaderTimeout = 10 * time.Second
	c.ConfigFile = getenv("TOLLGATE_CONFIG")
	if c.ConfigFile != "" {
		if c.Catalog, err = catalog.Load(c.ConfigFile, getenv); err != nil {
			return c, fmt.Errorf("TOLLGATE_CONFIG: %w", err)
		}
	} else {
		prices, err := budget.ParsePrices(c.PricesSpec)
		if err != nil {
			return c, fmt.Errorf("TOLLGATE_PRICES: %w", err)
		}
		if c.Catalog, err = catalog.FromEnv(getenv, prices, budget.DefaultPrice); err != nil {
			return c, err
		}
	}
	if err := c.usePriceList(getenv); err != nil {
		return c, err
	}
	if c.ModelBaseURL != "" {
		if u, err := url.Parse(c.ModelBaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("MODEL_BASE_URL must be an http(s) URL")
		}
	}
	c.WebhookAllow, err = webhookAllow(getenv)
	return c, err
}

// readDurations reads the settings that are durations, each a whole
// number of its unit within its range, failing on the first that is not.
func (c *config) readDurations(getenv func(string) string) error {
	for _, d := range []struct {
		name             string
		deflt, low, high int
		unit             time.Duration
		into             *time.Duration
	}{
		{"REQUEST_TIMEOUT_MS", 30000, 1, 1_800_000, time.Millisecond, &c.RequestTimeout},
		{"TOLLGATE_MAX_ADMISSION_WAIT_MS", 500, 1, 600_000, time.Millisecond, &c.MaxAdmissionWait},
		{"TOLLGATE_SHED_QUEUE_WAIT_S", 60, 0, 86_400, time.Second, &c.ShedQueueWait},
		{"TOLLGATE_FAILURE_REPLAY_WINDOW_S", 60, 0, 3600, time.Second, &c.FailureReplayWindow},
		{"TOLLGATE_RESCUE_AFTER_MS", 3_600_000, 1000, 86_400_000, time.Millisecond, &c.RescueAfter},
		{"TOLLGATE_SYNC_WAIT_S", 60, 1, 600, time.Second, &c.SyncWait},
		{"TOLLGATE_DRAIN_DELAY_S", 5, 0, 300, time.Second, &c.DrainDelay},
		{"TOLLGATE_DRAIN_TIMEOUT_S", 30, 1, 3600, time.Second, &c.DrainTimeout},
	} {
		n, err := intVar(getenv, d.name, d.deflt, d.low, d.high)
		if err != nil {
			return err
		}
		*d.into = time.Duration(n) * d.unit
	}
	return nil
}

// webhookAllow reads TOLLGATE_WEBHOOK_ALLOW, refusing the
// TOLLGATE_WEBHOOK_ALLOW_PRIVATE switch it replaces: a deployment that
// sets it expects a choice this server would not make.
func webhookAllow(getenv func(string) string) ([]netip.Prefix, error) {
	if getenv("TOLLGATE_WEBHOOK_ALLOW_PRIVATE") != "" {
		return nil, fmt.Errorf("TOLLGATE_WEBHOOK_ALLOW_PRIVATE is not a setting: list the ranges webhooks may reach in TOLLGATE_WEBHOOK_ALLOW (CIDRs), or set the webhook with an admin key")
	}
	return webhooks.ParseAllow(getenv("TOLLGATE_WEBHOOK_ALLOW"))
}

// Values of TOLLGATE_PRICES_FILE that name no file.
const (
	// pricesNone: no price list at all.
	pricesNone = "none"
	// pricesEmbedded is what the start-up log names as the price list
	// when it is the one built into the binary (catalog.EmbeddedPriceList).
	pricesEmbedded = "embedded"
)

// usePriceList reads TOLLGATE_PASS_THROUGH and puts a price list into the
// catalog: the file TOLLGATE_PRICES_FILE names, none when it says none,
// else, on the zero-config path, the list built into the binary. A
// catalog file takes a list only when TOLLGATE_PRICES_FILE names one: a
// list makes every name it has a model clients may call, which a catalog
// file's operator chose its models to prevent.
func (c *config) usePriceList(getenv func(string) string) error {
	switch v := getenv("TOLLGATE_PASS_THROUGH"); v {
	case "", "off":
	case "on":
		c.PassThrough = true
	default:
		return fmt.Errorf("TOLLGATE_PASS_THROUGH must be on or off, not %q", v)
	}
	c.PricesFile = getenv("TOLLGATE_PRICES_FILE")
	var (
		l   *catalog.PriceList
		err error
	)
	setting := "TOLLGATE_PRICES_FILE"
	switch {
	case c.PricesFile == pricesNone || (c.PricesFile == "" && c.ConfigFile != ""):
		return nil
	case c.PricesFile == "":
		c.PricesFile = pricesEmbedded
		setting = "the built-in price list (TOLLGATE_PRICES_FILE=none for none)"
		l, err = catalog.EmbeddedPriceList()
	default:
		l, err = catalog.LoadPriceList(c.PricesFile)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	if err := c.Catalog.UsePriceList(l, c.PassThrough); err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	c.PriceModels = l.Len()
	return nil
}

// logValue is the config as it may be logged: no API key, and every URL
// through logsafe.URL (no user info, query value or DSN password). With a
// catalog file (TOLLGATE_CONFIG) the zero-config settings it replaces
// (MODEL_*, TOLLGATE_PRICES) are left out: they are not used. Durations
// are Go duration strings ("30s").
func (c config) logValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("database_url", logsafe.URL(c.DatabaseURL)),
		slog.String("addr", c.Addr),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.Bool("metrics_token_set", c.MetricsToken != ""),
		slog.String("fake_addr", c.FakeAddr),
		slog.Bool("migrate", c.Migrate),
	}
	if c.ConfigFile == "" {
		attrs = append(attrs,
			slog.String("model_base_url", logsafe.URL(c.ModelBaseURL)),
			slog.Bool("model_api_key_set", c.ModelAPIKey != ""),
			slog.String("model_name", c.ModelName),
			slog.String("prices", c.PricesSpec))
	}
	attrs = append(attrs,
		slog.Int64("request_timeout_ms", c.RequestTimeout.Milliseconds()),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.Int("max_attempts", c.MaxAttempts),
		slog.Int("workers", c.Workers),
		slog.Int("max_admitting", c.MaxAdmitting),
		slog.Int64("max_admission_wait_ms", c.MaxAdmissionWait.Milliseconds()),
		slog.Int64("shed_queue_wait_s", int64(c.ShedQueueWait/time.Second)),
		slog.Int64("failure_replay_window_s", int64(c.FailureReplayWindow/time.Second)),
		slog.Int64("rescue_after_ms", c.RescueAfter.Milliseconds()),
		slog.String("drain_delay", c.DrainDelay.String()),
		slog.String("drain_timeout", c.DrainTimeout.String()),
		slog.String("config_file", c.ConfigFile),
		slog.String("prices_source", c.priceSource()),
		slog.String("prices_file", c.PricesFile),
		slog.Int("prices_file_models", c.PriceModels),
		slog.Bool("pass_through", c.PassThrough),
		slog.String("webhook_allow", prefixesForLog(c.WebhookAllow)),
		slog.Any("providers", providersForLog(c.Catalog)),
	)
	return slog.GroupValue(attrs...)
}

// priceSource names where a model's price comes from, the winner first: a
// catalog file's own prices, else TOLLGATE_PRICES or the built-in
// defaults it falls back to; then the price list (TOLLGATE_PRICES_FILE's
// or the embedded one), for the models those leave out. An operator who set two sources reads which one counts.
func (c config) priceSource() string {
	first := "TOLLGATE_PRICES"
	switch {
	case c.ConfigFile != "":
		first = "TOLLGATE_CONFIG"
	case c.PricesSpec == defaultPrices:
		first = "built-in defaults"
	}
	switch c.PricesFile {
	case "", pricesNone:
		return first
	case pricesEmbedded:
		return first + ", then the embedded price list"
	}
	return first + ", then TOLLGATE_PRICES_FILE"
}

// prefixesForLog is TOLLGATE_WEBHOOK_ALLOW as read, comma-separated.
func prefixesForLog(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// orNone turns a bound of zero, "none" in the environment, into the -1 that
// means "none" in tasks.Config (where zero takes the default).
func orNone[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func intVar(getenv func(string) string, name string, deflt, lo, hi int) (int, error) {
	s := getenv(name)
	if s == "" {
		return deflt, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}

// buildVersion is the VCS revision the binary was built from, recorded in
// every replay record.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return info.Main.Version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
