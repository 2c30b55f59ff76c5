package budget_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/testdb"
)

// BenchmarkBatch measures one transaction that reserves, or settles, n
// tasks of one owner with a capped workload: one statement per task
// against one statement for the batch. ns/op is per batch; µs/task is reported.
// Sequential, one connection: the statements' own cost, without waits.
//
//	go test -run '^$' -bench Batch -benchtime 200x ./budget/
func BenchmarkBatch(b *testing.B) {
	ctx := context.Background()
	pool, _ := testdb.NewPool(b)
	store := budget.NewStore(pool, nil)
	for _, l := range []budget.Limit{
		{OwnerID: "acme", Period: budget.PeriodNone, TotalMicros: 1 << 50},
		{OwnerID: "acme", Workload: "batch", Period: budget.PeriodNone, TotalMicros: 1 << 50},
	} {
		if _, err := store.SetLimit(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	batch := func(n int) []budget.Reservation {
		rs := make([]budget.Reservation, n)
		for i := range rs {
			var id string
			if err := pool.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
				b.Fatal(err)
			}
			rs[i] = budget.Reservation{TaskID: id, OwnerID: "acme", Workload: []string{"batch", "chat"}[i%2], Amount: 1_000, At: time.Now()}
		}
		return rs
	}
	run := func(b *testing.B, queue func(*pgx.Batch)) {
		b.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			q := &pgx.Batch{}
			queue(q)
			return tx.SendBatch(ctx, q).Close()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	settlements := func(rs []budget.Reservation) []budget.Settlement {
		ss := make([]budget.Settlement, len(rs))
		for i, r := range rs {
			ss[i] = budget.Settlement{TaskID: r.TaskID, Workload: r.Workload, Model: "m", InputTokens: 10, OutputTokens: 20,
				Source: budget.SourceReported, CostMicros: 700}
		}
		return ss
	}
	for _, n := range []int{1, 8, 32} {
		for _, together := range []bool{false, true} {
			how := map[bool]string{false: "each", true: "together"}[together]
			b.Run(fmt.Sprintf("reserve/%s/n=%d", how, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					rs := batch(n)
					b.StartTimer()
					run(b, func(q *pgx.Batch) {
						if together {
							budget.QueueReserve(q, rs...)
							return
						}
						for _, r := range rs {
							budget.QueueReserve(q, r)
						}
					})
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/task")
			})
			b.Run(fmt.Sprintf("settle/%s/n=%d", how, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					rs := batch(n)
					run(b, func(q *pgx.Batch) { budget.QueueReserve(q, rs...) })
					ss := settlements(rs)
					b.StartTimer()
					run(b, func(q *pgx.Batch) {
						if together {
							var set budget.Settlements
							outs := make([]budget.Settled, n)
							for i, s := range ss {
								_ = set.Add(s, &outs[i])
							}
							set.Queue(q, budget.DefaultThresholds)
							return
						}
						for _, s := range ss {
							var one budget.Settlements
							_ = one.Add(s, &budget.Settled{})
							one.Queue(q, budget.DefaultThresholds)
						}
					})
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/task")
			})
		}
	}
}
