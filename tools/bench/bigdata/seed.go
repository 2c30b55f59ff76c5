package bigdata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedReport is what a seed wrote and how long each part took.
type SeedReport struct {
	Tasks       int64   `json:"tasks"`
	LedgerTasks int64   `json:"ledger_tasks"`
	Universe    int64   `json:"universe"`
	Owners      int     `json:"owners"`
	From        string  `json:"from"`
	To          string  `json:"to"`
	Phases      []Phase `json:"phases"`
	Seconds     float64 `json:"seconds"`
	// Rows and SizesMB are per table, read after the seed (sizes include
	// indexes and TOAST).
	Rows    map[string]int64   `json:"rows"`
	SizesMB map[string]float64 `json:"sizes_mb"`
}

// Phase is one kind of statement summed over every batch.
type Phase struct {
	Name    string  `json:"name"`
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// seededTables are the tables the seed writes, in the order it reports
// them.
var seededTables = []string{"tasks", "task_attempts", "replay_records", "budget_reservations",
	"budget_ledger", "usage_records", "budget_periods", "owners"}

// Seed writes the history s describes into the migrated database behind
// pool, which must hold no tasks or seeded budgets yet, then vacuums and
// analyzes what it wrote, as autovacuum would have over the months the
// history spans. Each batch is its own transaction. It writes a line per
// batch to progress and fails on the first statement that fails.
func Seed(ctx context.Context, pool *pgxpool.Pool, s Shape, progress io.Writer) (*SeedReport, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("bigdata: seed: %w", err)
	}
	defer conn.Release()
	// Periods are UTC months: date arithmetic must not follow a local zone.
	if _, err := conn.Exec(ctx, `SET TimeZone = 'UTC'`); err != nil {
		return nil, fmt.Errorf("bigdata: seed: %w", err)
	}
	// Foreign keys are satisfied by construction; checking them row by row
	// would double the time the ledger takes. A session in replica mode
	// skips those triggers (as pg_restore --disable-triggers does); the
	// keys are checked in one pass at the end instead. Without the right
	// to do so, the seed just runs slower.
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	replica := err == nil
	var busy bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks) OR EXISTS (SELECT 1 FROM owners WHERE id = 'org-000')`).Scan(&busy)
	if err != nil {
		return nil, fmt.Errorf("bigdata: seed: is the database migrated? %w", err)
	}
	if busy {
		return nil, errors.New("bigdata: seed: the database already holds tasks or seeded owners; seed a fresh one")
	}

	started := time.Now()
	from := s.End.Add(-s.Span)
	rep := &SeedReport{Tasks: s.Tasks, LedgerTasks: s.LedgerTasks(), Universe: s.Universe(), Owners: s.Owners,
		From: from.Format(time.RFC3339), To: s.End.Format(time.RFC3339)}
	sd := &seeder{conn: conn.Conn(), progress: progress, phases: map[string]int{}, rep: rep}

	if err := sd.exec(ctx, "owners", insertOwnersSQL, from, s.Owners); err != nil {
		return nil, err
	}
	if err := sd.batches(ctx, s, s.Tasks, []statement{
		{"tasks (attributes)", batchTableSQL(true)},
		{"tasks", insertTasksSQL()}, {"task_attempts", insertAttemptsSQL()}, {"replay_records", insertReplaySQL()},
	}); err != nil {
		return nil, err
	}
	if s.Ledger > 0 {
		if err := sd.exec(ctx, "budget_limits", insertLimitsSQL, from, s.Owners); err != nil {
			return nil, err
		}
		if err := sd.exec(ctx, "budget_periods", insertPeriodsSQL, from, s.Owners, s.End); err != nil {
			return nil, err
		}
		if err := sd.exec(ctx, "budget_ledger (openings)", insertOpeningsSQL, from, s.Owners); err != nil {
			return nil, err
		}
		if err := sd.batches(ctx, s, s.LedgerTasks(), []statement{
			{"ledger (attributes)", batchTableSQL(false)},
			{"budget_reservations", insertReservationsSQL()}, {"budget_ledger", insertLedgerSQL()}, {"usage_records", insertUsageSQL()},
		}); err != nil {
			return nil, err
		}
		if err := sd.exec(ctx, "budget_periods (spent)", updateSpentSQL); err != nil {
			return nil, err
		}
	}
	if replica {
		if _, err := conn.Exec(ctx, `RESET session_replication_role`); err != nil {
			return nil, fmt.Errorf("bigdata: seed: %w", err)
		}
		var broken int64
		if err := conn.QueryRow(ctx, foreignKeysSQL).Scan(&broken); err != nil {
			return nil, fmt.Errorf("bigdata: seed: check foreign keys: %w", err)
		}
		if broken > 0 {
			return nil, fmt.Errorf("bigdata: seed: %d rows break a foreign key (a bug in the seed's SQL)", broken)
		}
	}
	for _, table := range seededTables {
		if err := sd.exec(ctx, "vacuum analyze", "VACUUM (ANALYZE) "+table); err != nil {
			return nil, err
		}
	}
	rep.Seconds = time.Since(started).Seconds()
	if err := sd.measure(ctx); err != nil {
		return nil, err
	}
	return rep, nil
}

type statement struct{ name, sql string }

type seeder struct {
	conn     *pgx.Conn
	progress io.Writer
	phases   map[string]int // name → index in rep.Phases
	rep      *SeedReport
}

// exec runs one statement and adds its rows and time to its phase.
func (sd *seeder) exec(ctx context.Context, name, sql string, args ...any) error {
	return sd.execOn(ctx, sd.conn, name, sql, args...)
}

// execer is a connection or a transaction.
type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

func (sd *seeder) execOn(ctx context.Context, q execer, name, sql string, args ...any) error {
	start := time.Now()
	tag, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("bigdata: seed %s: %w", name, err)
	}
	i, ok := sd.phases[name]
	if !ok {
		i = len(sd.rep.Phases)
		sd.phases[name] = i
		sd.rep.Phases = append(sd.rep.Phases, Phase{Name: name})
	}
	sd.rep.Phases[i].Rows += tag.RowsAffected()
	sd.rep.Phases[i].Seconds += time.Since(start).Seconds()
	return nil
}

// batches writes positions 1..n of the universe in batches, each batch's
// statements in one transaction.
func (sd *seeder) batches(ctx context.Context, s Shape, n int64, stmts []statement) error {
	if n == 0 {
		return nil
	}
	start := time.Now()
	for _, b := range Batches(n, s.Batch) {
		err := pgx.BeginFunc(ctx, sd.conn, func(tx pgx.Tx) error {
			// The first statement makes the batch's attributes; the
			// others read them.
			for k, st := range stmts {
				var args []any
				if k == 0 {
					args = []any{b[0], b[1], n, s.Universe(), s.End, s.Span.Seconds(), s.Owners}
				}
				if err := sd.execOn(ctx, tx, st.name, st.sql, args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(sd.progress, "  %s: %d/%d (%.0f s)\n", stmts[1].name, b[1], n, time.Since(start).Seconds())
	}
	return nil
}

// measure reads every seeded table's rows and size.
func (sd *seeder) measure(ctx context.Context) error {
	sd.rep.Rows, sd.rep.SizesMB = map[string]int64{}, map[string]float64{}
	for _, table := range seededTables {
		var n int64
		var bytes int64
		err := sd.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+`), pg_total_relation_size($1::regclass)`, table).
			Scan(&n, &bytes)
		if err != nil {
			return fmt.Errorf("bigdata: seed: measure %s: %w", table, err)
		}
		sd.rep.Rows[table], sd.rep.SizesMB[table] = n, float64(bytes)/(1<<20)
	}
	return nil
}
