package status_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/status"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *time.Time { tm := at.Add(d); return &tm }
	s := func(v string) *string { return &v }
	tests := []struct {
		name   string
		report status.Report
		want   string
	}{
		{
			name:   "empty",
			report: status.Report{At: at},
			want: `Tollgate status at 2026-11-30T12:00:00Z

Queues
  none

Provider keys (throttle pauses and circuit breakers)
  none

Budgets near their limit (reserved + spent >= 70% of the period's total; amounts in micros)
  none

Oldest unfinished tasks
  none
`,
		},
		{
			name: "full",
			report: status.Report{
				At: at,
				Queues: []status.Queue{
					{Name: "provider_openai", Available: 12, Scheduled: 3, Running: 100, RunningInline: 40, Retryable: 1, OldestSeconds: 725.4, DueWaitSeconds: 42.2},
					{Name: "provider_idle"},
				},
				Gates: []status.Gate{
					{ProviderKey: "openai", State: "open", NextProbeAt: ts(25 * time.Second), OpenedAt: ts(-3*time.Hour - 4*time.Minute),
						ReasonClass: s("exhausted"), ReasonCode: s("insufficient_quota")},
					{ProviderKey: "workers\tai", State: "closed"},
				},
				Budgets: []status.Budget{
					{OwnerID: "acme", Workload: "batch", Period: "daily", PeriodStart: at.Truncate(24 * time.Hour),
						TotalMicros: 5000000, ReservedMicros: 1000000, SpentMicros: 3625000, UsedPct: 92.5},
				},
				Oldest: []status.Waiting{
					{TaskID: "0b6f0c1e-1d2b-4a9e-9c1e-1f2e3d4c5b6a", OwnerID: "acme", Model: "gpt-4o-mini", Status: "queued",
						CreatedAt: at.Add(-50 * time.Hour), AgeSeconds: 50 * 3600, WaitingFor: s("exhausted")},
					{TaskID: "1b6f0c1e-1d2b-4a9e-9c1e-1f2e3d4c5b6a", OwnerID: "beta", Model: "claude-haiku", Status: "running",
						CreatedAt: at.Add(-9 * time.Second), AgeSeconds: 9.4},
				},
			},
			want: `Tollgate status at 2026-11-30T12:00:00Z

Queues
QUEUE            AVAILABLE  SCHEDULED  RUNNING  INLINE  RETRYABLE  OLDEST  DUE WAIT
provider_openai  12         3          100      40      1          12m5s   42s
provider_idle    0          0          0        0       0          -       -

Provider keys (throttle pauses and circuit breakers)
KEY         STATE   PAUSED UNTIL  NEXT PROBE                     OPENED                           REASON
openai      open    -             2026-11-30T12:00:25Z (in 25s)  2026-11-30T08:56:00Z (3h4m ago)  exhausted / insufficient_quota
workers ai  closed  -             -                              -                                -

Budgets near their limit (reserved + spent >= 70% of the period's total; amounts in micros)
OWNER  WORKLOAD  PERIOD  PERIOD START          USED   RESERVED  SPENT    TOTAL
acme   batch     daily   2026-11-30T00:00:00Z  92.5%  1000000   3625000  5000000

Oldest unfinished tasks
TASK                                  OWNER  MODEL         STATUS   AGE   WAITING FOR
0b6f0c1e-1d2b-4a9e-9c1e-1f2e3d4c5b6a  acme   gpt-4o-mini   queued   2d2h  exhausted
1b6f0c1e-1d2b-4a9e-9c1e-1f2e3d4c5b6a  beta   claude-haiku  running  9s    -
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			if err := tt.report.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("table mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteTableError(t *testing.T) {
	t.Parallel()
	r := status.Report{Queues: []status.Queue{{Name: "q"}}}
	if err := r.WriteTable(failingWriter{}); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteTable to a failing writer = %v, want disk full", err)
	}
}
