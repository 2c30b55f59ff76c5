package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgMeter reads what Postgres did for one database. Commits and row counts
// come from pg_stat_database, which keeps them per database. WAL and write
// transactions do not exist per database in Postgres's statistics; on a
// shared server other databases' writes would swamp ours. So, when the
// pg_walinspect extension is available (PostgreSQL 15 contrib; superuser to
// create), the meter reads the WAL written during a measurement and keeps
// only the records of transactions that touched this database's relations:
// their bytes, and how many such transactions there were. Without it, it
// falls back to the cluster-wide WAL position and transaction id counter.
//
// A checkpoint may recycle WAL before it is read (on a busy shared server,
// within seconds), so the meter holds a temporary physical replication
// slot, moved up to the start of each measurement: Postgres keeps the WAL
// of the measurement until it is read, and drops the slot when the meter's
// connection closes, even if tollbench dies.
type pgMeter struct {
	conn       *pgx.Conn
	dbOID      uint32
	slot       string
	walInspect bool
	why        string // why pg_walinspect is not used
}

// newPGMeter returns a meter on conn's database. It returns an error only
// when the database cannot be read at all; without pg_walinspect or a
// replication slot it measures cluster-wide.
func newPGMeter(ctx context.Context, conn *pgx.Conn) (*pgMeter, error) {
	m := &pgMeter{conn: conn}
	if err := conn.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&m.dbOID); err != nil {
		return nil, fmt.Errorf("bench: database oid: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		m.why = "CREATE EXTENSION pg_walinspect: " + err.Error()
		return m, nil
	}
	m.slot = fmt.Sprintf("tollbench_%d_%d", conn.PgConn().PID(), m.dbOID)
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, m.slot); err != nil {
		m.why = "a temporary replication slot to keep WAL until it is read: " + err.Error()
		return m, nil
	}
	m.walInspect = true
	return m, nil
}

// source says how WAL and write transactions are counted.
func (m *pgMeter) source() string {
	if m.walInspect {
		return "pg_walinspect: WAL records of transactions that wrote to this database"
	}
	return "cluster-wide WAL position and xid counter (pg_walinspect unavailable: " + m.why + ")"
}

// pgCounters is one reading of the counters.
type pgCounters struct {
	commits      int64 // xact_commit: every transaction, read-only ones too
	rollbacks    int64
	inserted     int64
	updated      int64
	deleted      int64
	lsn          string // WAL flushed so far (pg_walinspect reads only flushed WAL)
	walBytes     int64  // the same, in bytes from 0/0
	nextXID      int64  // cluster-wide: only transactions that write take an xid
	otherCommits int64  // xact_commit of every other database
	tasksUpdated int64  // pg_stat_user_tables for tasks: updates,
	tasksHOT     int64  // and those that were heap-only (HOT)
}

// read takes a reading. Each autocommit statement is its own transaction,
// so pg_stat_database is read fresh, not from a cached snapshot. The slot
// moves up to the reading: WAL before it is no longer needed.
func (m *pgMeter) read(ctx context.Context) (pgCounters, error) {
	var c pgCounters
	if m.walInspect {
		if _, err := m.conn.Exec(ctx, `SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn())`, m.slot); err != nil {
			return c, fmt.Errorf("bench: advance replication slot %s: %w", m.slot, err)
		}
	}
	err := m.conn.QueryRow(ctx, `
		SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
		       l.lsn::text, pg_wal_lsn_diff(l.lsn, '0/0')::bigint,
		       pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
		       (SELECT coalesce(sum(o.xact_commit), 0) FROM pg_stat_database o
		        WHERE o.datname IS DISTINCT FROM current_database())::bigint,
		       coalesce(t.n_tup_upd, 0), coalesce(t.n_tup_hot_upd, 0)
		FROM pg_stat_database d CROSS JOIN (SELECT pg_current_wal_flush_lsn() AS lsn) l
		     LEFT JOIN pg_stat_user_tables t ON t.relid = to_regclass('tasks')
		WHERE d.datname = current_database()`).
		Scan(&c.commits, &c.rollbacks, &c.inserted, &c.updated, &c.deleted, &c.lsn, &c.walBytes, &c.nextXID, &c.otherCommits,
			&c.tasksUpdated, &c.tasksHOT)
	if err != nil {
		return c, fmt.Errorf("bench: read pg_stat_database: %w", err)
	}
	return c, nil
}

// PGCost is what Postgres did during one measurement, in total and per
// finished task.
type PGCost struct {
	Commits    int64 `json:"commits"` // read-only transactions included
	Rollbacks  int64 `json:"rollbacks"`
	WriteXacts int64 `json:"write_xacts"`
	WALBytes   int64 `json:"wal_bytes"`
	// WALFPIBytes is the part of WALBytes that is full-page images: the
	// first change to a page after a checkpoint logs the whole page, so
	// this share depends on when checkpoints ran (on a shared server, on
	// the neighbours), not on Tollgate. Only with pg_walinspect.
	WALFPIBytes int64 `json:"wal_fpi_bytes"`
	// WALAttributed: WAL and write transactions are this database's own
	// (pg_walinspect), not the whole server's; WALSource says how they
	// were counted.
	WALAttributed   bool   `json:"wal_attributed"`
	WALSource       string `json:"wal_source"`
	ClusterWALBytes int64  `json:"cluster_wal_bytes"`
	RowsInserted    int64  `json:"rows_inserted"`
	RowsUpdated     int64  `json:"rows_updated"`
	RowsDeleted     int64  `json:"rows_deleted"`
	OtherDBCommits  int64  `json:"other_db_commits"`
	// TasksUpdated and TasksHOTUpdated count the updates of tasks rows and
	// those that were heap-only (no index entry written): a task's finish
	// should be one (the baseline migration).
	TasksUpdated    int64 `json:"tasks_updated"`
	TasksHOTUpdated int64 `json:"tasks_hot_updated"`

	CommitsPerTask    float64 `json:"commits_per_task"`
	WriteXactsPerTask float64 `json:"write_xacts_per_task"`
	WALBytesPerTask   float64 `json:"wal_bytes_per_task"`
	WALFPIPerTask     float64 `json:"wal_fpi_bytes_per_task"`
	RowsPerTask       float64 `json:"rows_written_per_task"`
}

// cost is what happened between two readings, per task when tasks > 0. A
// WAL range pg_walinspect cannot read (recycled by a checkpoint meanwhile)
// falls back to the cluster-wide figures, said so in WALSource.
func (m *pgMeter) cost(ctx context.Context, before, after pgCounters, tasks int) PGCost {
	c := PGCost{
		Commits:         after.commits - before.commits,
		Rollbacks:       after.rollbacks - before.rollbacks,
		WriteXacts:      after.nextXID - before.nextXID,
		WALBytes:        after.walBytes - before.walBytes,
		ClusterWALBytes: after.walBytes - before.walBytes,
		WALAttributed:   m.walInspect,
		WALSource:       m.source(),
		RowsInserted:    after.inserted - before.inserted,
		RowsUpdated:     after.updated - before.updated,
		RowsDeleted:     after.deleted - before.deleted,
		OtherDBCommits:  after.otherCommits - before.otherCommits,
		TasksUpdated:    after.tasksUpdated - before.tasksUpdated,
		TasksHOTUpdated: after.tasksHOT - before.tasksHOT,
	}
	if m.walInspect && after.lsn != before.lsn {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		err := m.conn.QueryRow(wctx, `
			WITH r AS (
				SELECT xid, record_length, fpi_length, block_ref ~ $3 AS ours
				FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
			), x AS (
				SELECT DISTINCT xid FROM r WHERE ours AND xid <> '0'::xid
			)
			SELECT coalesce(sum(r.record_length), 0)::bigint, coalesce(sum(r.fpi_length), 0)::bigint,
			       (SELECT count(*) FROM x)
			FROM r LEFT JOIN x ON x.xid = r.xid
			WHERE r.ours OR x.xid IS NOT NULL`,
			before.lsn, after.lsn, fmt.Sprintf(` rel [0-9]+/%d/`, m.dbOID)).Scan(&c.WALBytes, &c.WALFPIBytes, &c.WriteXacts)
		if err != nil {
			c.WALAttributed, c.WALFPIBytes = false, 0
			c.WALBytes, c.WriteXacts = c.ClusterWALBytes, after.nextXID-before.nextXID
			c.WALSource = "cluster-wide WAL position and xid counter (pg_walinspect failed: " + err.Error() + ")"
		}
	}
	if tasks > 0 {
		n := float64(tasks)
		c.CommitsPerTask = float64(c.Commits) / n
		c.WriteXactsPerTask = float64(c.WriteXacts) / n
		c.WALBytesPerTask = float64(c.WALBytes) / n
		c.WALFPIPerTask = float64(c.WALFPIBytes) / n
		c.RowsPerTask = float64(c.RowsInserted+c.RowsUpdated+c.RowsDeleted) / n
	}
	return c
}
