package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/testdb"
)

// TestPoolMetricsCountWaitsForAConnection reads a one-connection pool's
// series through its life: the first acquire waits for the connection to
// open, a second one gives up (its context ends) while the first holds it,
// and a third finds it idle.
func TestPoolMetricsCountWaitsForAConnection(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&poolCollector{pool: pool})
	check := func(step string, want map[[2]string]float64) {
		t.Helper()
		for k, v := range want {
			if got := gathered(t, reg, k[0], k[1]); got != v {
				t.Errorf("%s: %s{%s} = %v, want %v", step, k[0], k[1], got, v)
			}
		}
	}

	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("held", map[[2]string]float64{
		{"tollgate_db_pool_acquires_total", ""}: 1, {"tollgate_db_pool_waits_total", ""}: 1,
		{"tollgate_db_pool_connections", "in_use"}: 1, {"tollgate_db_pool_connections", "idle"}: 0,
		{"tollgate_db_pool_max_connections", ""}: 1,
	})
	if got := gathered(t, reg, "tollgate_db_pool_wait_seconds_total", ""); got <= 0 {
		t.Errorf("wait seconds = %v after waiting for the connection to open, want > 0", got)
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if conn, err := pool.Acquire(short); err == nil {
		conn.Release()
		t.Fatal("a second acquire got a connection while the only one was held")
	}
	check("gave up", map[[2]string]float64{
		{"tollgate_db_pool_canceled_acquires_total", ""}: 1, {"tollgate_db_pool_acquires_total", ""}: 1,
	})

	held.Release()
	again, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again.Release()
	check("idle", map[[2]string]float64{
		{"tollgate_db_pool_acquires_total", ""}: 2, {"tollgate_db_pool_waits_total", ""}: 1,
		{"tollgate_db_pool_connections", "in_use"}: 0, {"tollgate_db_pool_connections", "idle"}: 1,
		{"tollgate_db_pool_connections", "constructing"}: 0,
	})
}

// gathered reads one series from reg: the metric name's, with the state
// label's value when state is not empty.
func gathered(t *testing.T, reg *prometheus.Registry, name, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if state != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != state) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s{%s}", name, state)
	return 0
}
