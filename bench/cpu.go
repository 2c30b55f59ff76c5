package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is the unit of CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux configuration Go supports (reading it properly would need
// sysconf, that is cgo).
const clockTick = 10 * time.Millisecond

// procCPU returns the user plus system CPU time a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime from a /proc/PID/stat line. The
// command name, in parentheses, may hold spaces and parentheses itself, so
// fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: unreadable /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc stat %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: unreadable /proc stat %q", stat)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// cpuReading is the CPU time of a set of processes at one moment.
type cpuReading map[int]time.Duration

func readCPU(pids []int) cpuReading {
	r := cpuReading{}
	for _, pid := range pids {
		if d, err := procCPU(pid); err == nil {
			r[pid] = d
		}
	}
	return r
}

// cpuUsed is the CPU the processes of after used since before; a process
// that started in between counts from zero. A process that ended in
// between is missed: the figure is a lower bound.
func cpuUsed(before, after cpuReading) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

// backendPIDs lists the server processes of the other sessions on the
// meter's database: Tollgate's pool. Their CPU is readable only when
// Postgres runs on this machine.
func (m *pgMeter) backendPIDs(ctx context.Context) ([]int, error) {
	rows, err := m.conn.Query(ctx, `
		SELECT pid::int8 FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	if err != nil {
		return nil, fmt.Errorf("bench: list backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("bench: list backends: %w", err)
	}
	return pids, nil
}
