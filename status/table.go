package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report as aligned tables, one section per part,
// with "none" for an empty part. Times are UTC, with how far they are from
// the report's moment. It returns the first error writing to w.
func (r Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "Tollgate status at %s\n", r.At.UTC().Format(time.RFC3339))

	section(ew, "Queues", len(r.Queues), "QUEUE\tAVAILABLE\tSCHEDULED\tRUNNING\tINLINE\tRETRYABLE\tOLDEST\tDUE WAIT", func(tw io.Writer) {
		for _, q := range r.Queues {
			oldest, due := "-", "-"
			if q.Available+q.Scheduled+q.Running+q.RunningInline+q.Retryable > 0 {
				oldest = human(seconds(q.OldestSeconds))
			}
			if q.Available > 0 {
				due = human(seconds(q.DueWaitSeconds))
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", cell(q.Name), q.Available, q.Scheduled, q.Running, q.RunningInline, q.Retryable, oldest, due)
		}
	})

	section(ew, "Provider keys (throttle pauses and circuit breakers)", len(r.Gates), "KEY\tSTATE\tPAUSED UNTIL\tNEXT PROBE\tOPENED\tREASON", func(tw io.Writer) {
		for _, g := range r.Gates {
			reason := "-"
			if g.ReasonClass != nil || g.ReasonCode != nil {
				reason = orDash(g.ReasonClass) + " / " + orDash(g.ReasonCode)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(g.ProviderKey), cell(g.State),
				r.when(g.PausedUntil), r.when(g.NextProbeAt), r.when(g.OpenedAt), cell(reason))
		}
	})

	title := fmt.Sprintf("Budgets near their limit (reserved + spent >= %d%% of the period's total; amounts in micros)", NearLimitPct)
	section(ew, title, len(r.Budgets), "OWNER\tWORKLOAD\tPERIOD\tPERIOD START\tUSED\tRESERVED\tSPENT\tTOTAL", func(tw io.Writer) {
		for _, b := range r.Budgets {
			workload := b.Workload
			if workload == "" {
				workload = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%d\t%d\t%d\n", cell(b.OwnerID), cell(workload), cell(b.Period),
				b.PeriodStart.UTC().Format(time.RFC3339), b.UsedPct, b.ReservedMicros, b.SpentMicros, b.TotalMicros)
		}
	})

	section(ew, "Oldest unfinished tasks", len(r.Oldest), "TASK\tOWNER\tMODEL\tSTATUS\tAGE\tWAITING FOR", func(tw io.Writer) {
		for _, t := range r.Oldest {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(t.TaskID), cell(t.OwnerID), cell(t.Model), cell(t.Status),
				human(seconds(t.AgeSeconds)), cell(orDash(t.WaitingFor)))
		}
	})
	return ew.err
}

// section prints a heading and either "none" or a table aligned on its own
// columns.
func section(w io.Writer, title string, n int, header string, rows func(io.Writer)) {
	fmt.Fprintf(w, "\n%s\n", title)
	if n == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	_ = tw.Flush() // a write error is kept by w
}

// when prints a moment as UTC and relative to the report: "in 25s" for a
// pause or probe still ahead, "12m ago" for one past.
func (r Report) when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(r.At)
	rel := "in " + human(d)
	if d < 0 {
		rel = human(-d) + " ago"
	}
	return t.UTC().Format(time.RFC3339) + " (" + rel + ")"
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// human prints a duration to the second, shortened to its two largest
// units: 25s, 12m3s, 3h4m, 2d5h.
func human(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// cell keeps a value on its row and in its column.
func cell(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// errWriter keeps the first write error so the printing code can stay
// linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
