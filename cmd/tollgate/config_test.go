package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/tasks"
)

// The shedding bounds: defaults, zero for none (passed to tasks.Config as
// -1, since zero there takes the default), and out-of-range values refused.
func TestSheddingSettings(t *testing.T) {
	cases := []struct {
		name          string
		env           map[string]string
		wantAdmitting int
		wantWait      time.Duration
		wantErr       bool
	}{
		{"defaults", nil, 64, time.Minute, false},
		{"set", map[string]string{"TOLLGATE_MAX_ADMITTING": "64", "TOLLGATE_SHED_QUEUE_WAIT_S": "5"}, 64, 5 * time.Second, false},
		{"zero is none", map[string]string{"TOLLGATE_MAX_ADMITTING": "0", "TOLLGATE_SHED_QUEUE_WAIT_S": "0"}, -1, -1, false},
		{"negative admitting", map[string]string{"TOLLGATE_MAX_ADMITTING": "-1"}, 0, 0, true},
		{"not a number", map[string]string{"TOLLGATE_SHED_QUEUE_WAIT_S": "1m"}, 0, 0, true},
		{"admission wait zero", map[string]string{"TOLLGATE_MAX_ADMISSION_WAIT_MS": "0"}, 0, 0, true},
		{"too long", map[string]string{"TOLLGATE_SHED_QUEUE_WAIT_S": "86401"}, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return c.env[k] })
			if (err != nil) != c.wantErr {
				t.Fatalf("loadConfig: err = %v, want error %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if got := orNone(cfg.MaxAdmitting); got != c.wantAdmitting {
				t.Errorf("MaxAdmitting = %d, want %d", got, c.wantAdmitting)
			}
			if got := orNone(cfg.ShedQueueWait); got != c.wantWait {
				t.Errorf("ShedQueueWait = %s, want %s", got, c.wantWait)
			}
		})
	}
}

// The drain delay: long enough by default for a readiness probe to see
// the drain, zero to close at once, and out-of-range values refused naming
// the variable.
func TestDrainDelaySetting(t *testing.T) {
	cases := []struct {
		name    string
		value   string
		want    time.Duration
		wantErr string
	}{
		{"default", "", 5 * time.Second, ""},
		{"zero closes at once", "0", 0, ""},
		{"set", "20", 20 * time.Second, ""},
		{"too long", "301", 0, "TOLLGATE_DRAIN_DELAY_S must be a whole number from 0 to 300"},
		{"a duration is not seconds", "5s", 0, "TOLLGATE_DRAIN_DELAY_S must be a whole number from 0 to 300"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string {
				if k == "TOLLGATE_DRAIN_DELAY_S" {
					return c.value
				}
				return ""
			})
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("loadConfig: err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.DrainDelay != c.want {
				t.Errorf("DrainDelay = %s, want %s", cfg.DrainDelay, c.want)
			}
		})
	}
}

// The start-up line names the price source that wins, then the one that
// fills what it leaves out.
func TestPriceSource(t *testing.T) {
	cases := []struct {
		name string
		cfg  config
		want string
	}{
		{"nothing set", config{PricesSpec: defaultPrices}, "built-in defaults"},
		{"TOLLGATE_PRICES", config{PricesSpec: "m=1:2"}, "TOLLGATE_PRICES"},
		{"defaults and the embedded list", config{PricesSpec: defaultPrices, PricesFile: pricesEmbedded}, "built-in defaults, then the embedded price list"},
		{"defaults and no list", config{PricesSpec: defaultPrices, PricesFile: pricesNone}, "built-in defaults"},
		{"defaults and a price list", config{PricesSpec: defaultPrices, PricesFile: "p.json"}, "built-in defaults, then TOLLGATE_PRICES_FILE"},
		{"TOLLGATE_PRICES and a price list", config{PricesSpec: "m=1:2", PricesFile: "p.json"}, "TOLLGATE_PRICES, then TOLLGATE_PRICES_FILE"},
		{"a catalog file", config{ConfigFile: "c.yaml", PricesSpec: "m=1:2"}, "TOLLGATE_CONFIG"},
		{"a catalog file and a price list", config{ConfigFile: "c.yaml", PricesFile: "p.json"}, "TOLLGATE_CONFIG, then TOLLGATE_PRICES_FILE"},
	}
	for _, c := range cases {
		if got := c.cfg.priceSource(); got != c.want {
			t.Errorf("%s: priceSource() = %q, want %q", c.name, got, c.want)
		}
	}
}

// TOLLGATE_PRICES_FILE loads a price list into the catalog, the embedded
// one unless it names a file or none (and with a catalog file, none
// unless it names one), and turns pass-through off unless
// TOLLGATE_PASS_THROUGH=on; a bad file or switch stops the start, naming
// the variable.
func TestPriceListSettings(t *testing.T) {
	dir := t.TempDir()
	inexact := filepath.Join(dir, "inexact.json")
	if err := os.WriteFile(inexact, []byte(`{"gpt-4o-mini": {"input_cost_per_token": 1.23456789e-13}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(dir, "twice.json")
	if err := os.WriteFile(twice, []byte(`{"gpt-4o-mini": {"input_cost_per_token": 1.5e-07}, "gpt-4o-mini": {"input_cost_per_token": 1e-06}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	formula := filepath.Join(dir, "formula.json")
	if err := os.WriteFile(formula, []byte(`{"gpt-4o-mini": {"input_cost_per_token": 1.5e-07}, "=cmd|' /C calc'!A0": {"input_cost_per_token": 1e-06}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	catalogFile := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalogFile, []byte("providers: [{key: main, kind: openai, base_url: fake}]\nmodels: [{name: gpt-4o-mini, provider: main}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const shipped = "../../deploy/prices/model_prices.json"
	cases := []struct {
		name        string
		env         map[string]string
		wantErr     string // "" for none
		wantFile    string
		passThrough bool // a typo passes through
	}{
		{"nothing set", nil, "", pricesEmbedded, false},
		{"nothing set, switch on", map[string]string{"TOLLGATE_PASS_THROUGH": "on"}, "", pricesEmbedded, true},
		{"no list", map[string]string{"TOLLGATE_PRICES_FILE": "none"}, "", pricesNone, true},
		{"no list, switch on", map[string]string{"TOLLGATE_PRICES_FILE": "none", "TOLLGATE_PASS_THROUGH": "on"}, "", pricesNone, true},
		{"None is a file name", map[string]string{"TOLLGATE_PRICES_FILE": "None"}, "TOLLGATE_PRICES_FILE: price list: open None", "", false},
		{"a catalog file", map[string]string{"TOLLGATE_CONFIG": catalogFile}, "", "", false},
		{"a catalog file and the shipped list", map[string]string{"TOLLGATE_CONFIG": catalogFile, "TOLLGATE_PRICES_FILE": shipped}, "", shipped, false},
		{"the shipped list", map[string]string{"TOLLGATE_PRICES_FILE": shipped}, "", shipped, false},
		{"the shipped list, switch off", map[string]string{"TOLLGATE_PRICES_FILE": shipped, "TOLLGATE_PASS_THROUGH": "off"}, "", shipped, false},
		{"the shipped list, switch on", map[string]string{"TOLLGATE_PRICES_FILE": shipped, "TOLLGATE_PASS_THROUGH": "on"}, "", shipped, true},
		{"bad switch", map[string]string{"TOLLGATE_PASS_THROUGH": "yes"}, "TOLLGATE_PASS_THROUGH must be on or off", "", false},
		{"missing file", map[string]string{"TOLLGATE_PRICES_FILE": filepath.Join(dir, "none.json")}, "TOLLGATE_PRICES_FILE", "", false},
		{"inexact cost", map[string]string{"TOLLGATE_PRICES_FILE": inexact}, `TOLLGATE_PRICES_FILE: price list: model "gpt-4o-mini": input_cost_per_token`, "", false},
		{"a model listed twice", map[string]string{"TOLLGATE_PRICES_FILE": twice}, `TOLLGATE_PRICES_FILE: price list: model "gpt-4o-mini" is listed twice`, "", false},
		{"a formula for a name", map[string]string{"TOLLGATE_PRICES_FILE": formula}, `TOLLGATE_PRICES_FILE: price list: model "=cmd|' /C calc'!A0": names may not start with '='`, "", false},
		{"a model priced twice", map[string]string{"TOLLGATE_PRICES": "m=1:2,m =3:4"}, `TOLLGATE_PRICES: budget: price "m =3:4": model "m" is priced twice`, "", false},
		{"a control character in TOLLGATE_PRICES", map[string]string{"TOLLGATE_PRICES": "m\x1b[2J=1:2"}, `TOLLGATE_PRICES: model "m\x1b[2J": names may not hold control`, "", false},
		{"default model not listed", map[string]string{"TOLLGATE_PRICES_FILE": shipped, "MODEL_NAME": "private-model"}, `"private-model"`, "", false},
		{"default model not in the embedded list", map[string]string{"MODEL_NAME": "private-model"}, `the built-in price list (TOLLGATE_PRICES_FILE=none for none): catalog: default model "private-model"`, "", false},
		{"default model not listed, no list", map[string]string{"TOLLGATE_PRICES_FILE": "none", "MODEL_NAME": "private-model"}, "", pricesNone, true},
		{"default model not listed, switch on", map[string]string{"TOLLGATE_PRICES_FILE": shipped, "MODEL_NAME": "private-model", "TOLLGATE_PASS_THROUGH": "on"}, "", shipped, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("loadConfig: err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if listed := c.wantFile != "" && c.wantFile != pricesNone; cfg.PricesFile != c.wantFile || listed != (cfg.PriceModels > 0) {
				t.Errorf("PricesFile %q with %d models, want %q", cfg.PricesFile, cfg.PriceModels, c.wantFile)
			}
			_, priced, err := cfg.Catalog.Resolve("gpt-4o-mnii")
			if passed := err == nil && !priced; passed != c.passThrough {
				t.Errorf("a typo passed through: %v (%v), want %v", passed, err, c.passThrough)
			}
			logged := fmt.Sprint(cfg.logValue())
			if !strings.Contains(logged, "prices_file="+c.wantFile) || !strings.Contains(logged, fmt.Sprintf("prices_file_models=%d", cfg.PriceModels)) {
				t.Errorf("start-up log %s lacks the price list's path and model count", logged)
			}
		})
	}
}

// TOLLGATE_WEBHOOK_ALLOW is read as CIDRs and logged as read; a bad entry
// and the retired TOLLGATE_WEBHOOK_ALLOW_PRIVATE stop start-up, naming
// the variable.
func TestWebhookAllowSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		want    string // the allow list as logged
		wantErr string
	}{
		{"unset", nil, "", ""},
		{"CIDRs and an address", map[string]string{"TOLLGATE_WEBHOOK_ALLOW": "10.20.0.0/16, fd12::/48 192.168.5.7"}, "10.20.0.0/16,fd12::/48,192.168.5.7/32", ""},
		{"not a CIDR", map[string]string{"TOLLGATE_WEBHOOK_ALLOW": "10.20.0.0/16,intranet"}, "", "TOLLGATE_WEBHOOK_ALLOW"},
		{"host bits", map[string]string{"TOLLGATE_WEBHOOK_ALLOW": "10.20.0.1/16"}, "", "10.20.0.0/16"},
		{"the retired switch", map[string]string{"TOLLGATE_WEBHOOK_ALLOW_PRIVATE": "on"}, "", "TOLLGATE_WEBHOOK_ALLOW"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadConfig(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("loadConfig: %v, want an error naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := prefixesForLog(cfg.WebhookAllow); got != c.want {
				t.Errorf("allow list %q, want %q", got, c.want)
			}
			if !strings.Contains(cfg.logValue().String(), "webhook_allow="+c.want) {
				t.Errorf("the logged config %s lacks webhook_allow=%s", cfg.logValue(), c.want)
			}
		})
	}
}

// The failure replay window: a minute by default, zero for none (passed
// to tasks.Config as -1), beyond an hour refused.
func TestFailureReplayWindowSetting(t *testing.T) {
	cases := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", time.Minute, false},
		{"5", 5 * time.Second, false},
		{"0", -1, false},
		{"3601", 0, true},
		{"-1", 0, true},
	}
	for _, c := range cases {
		cfg, err := loadConfig(func(k string) string {
			if k == "TOLLGATE_FAILURE_REPLAY_WINDOW_S" {
				return c.value
			}
			return ""
		})
		if (err != nil) != c.wantErr {
			t.Fatalf("%q: loadConfig: err = %v, want error %v", c.value, err, c.wantErr)
		}
		if c.wantErr {
			continue
		}
		if got := tasksConfig(cfg, func(string) string { return "" }, tasks.Config{}).FailureReplayWindow; got != c.want {
			t.Errorf("%q: tasks.Config.FailureReplayWindow = %s, want %s", c.value, got, c.want)
		}
	}
}
