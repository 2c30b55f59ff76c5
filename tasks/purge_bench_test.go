package tasks_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/internal/testdb"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/seal"
	"github.com/tollgate/tollgate/tasks"
)

// BenchmarkPurgeBodies measures retention over 100,000 expired tasks, in
// batches of 1,000: run with -bench PurgeBodies -benchtime 1x. It reports
// tasks purged per second; it never asserts a time.
func BenchmarkPurgeBodies(b *testing.B) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(b)
	fp := fake.New()
	srv := httptest.NewServer(fp)
	b.Cleanup(func() { fp.Close(); srv.Close() })
	cat, err := catalog.Parse([]byte("providers: [{key: default, kind: openai, base_url: fake}]\ndefault_model: m\npass_through: true\n"), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	clients, err := cat.Clients(srv.Client(), srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	sealer, _ := seal.New(bytes.Repeat([]byte{1}, 32))
	svc, err := tasks.New(pool, tasks.Config{Catalog: cat, Clients: clients, Sealer: sealer})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO owners (id) VALUES ('bench')`); err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	var purged int64
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, err := pool.Exec(ctx, `
			INSERT INTO tasks (owner_id, idempotency_key, request_hash, request, model, status, result, finished_at, deadline_at, payload, output_sealed)
			SELECT 'bench', 'k-' || $1::int || '-' || g, '\x00', '{"messages": [{"role": "user", "content": "[EMAIL_1] asks about an order"}]}',
			       'm', 'succeeded', '{"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1, "source": "reported"}, "cost_micros": 1}',
			       now() - interval '90 days', now(), '\x0102030405', '\x0102030405'
			FROM generate_series(1, $2::int) g`, i, n)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		got, err := svc.PurgeBodies(ctx, time.Now(), 1000)
		elapsed += time.Since(start)
		if err != nil || got != n {
			b.Fatalf("purged %d, %v; want %d", got, err, n)
		}
		purged += got
	}
	b.ReportMetric(float64(purged)/elapsed.Seconds(), "tasks/s")
}
