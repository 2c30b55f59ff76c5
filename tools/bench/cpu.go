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

// hostCPU is the machine's CPU time so far, all CPUs together: busy (every
// state but idle and iowait) and total.
func hostCPU() (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq and steal, in clock ticks (guest time
// is already counted in user).
func parseProcStat(stat string) (busy, total time.Duration, err error) {
	for line := range strings.Lines(stat) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("bench: short /proc/stat cpu line %q", strings.TrimSpace(line))
		}
		var ticks [8]int64
		for i := range ticks {
			if ticks[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("bench: unreadable /proc/stat cpu line %q", strings.TrimSpace(line))
			}
		}
		var sum int64
		for _, t := range ticks {
			sum += t
		}
		idle := ticks[3] + ticks[4]
		return time.Duration(sum-idle) * clockTick, time.Duration(sum) * clockTick, nil
	}
	return 0, 0, fmt.Errorf("bench: /proc/stat has no cpu line")
}

// selfCPU is this process's CPU time so far, or 0 when unreadable.
func selfCPU() time.Duration {
	d, err := procCPU(os.Getpid())
	if err != nil {
		return 0
	}
	return d
}
