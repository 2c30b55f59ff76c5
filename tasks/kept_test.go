package tasks

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/replay"
)

func TestAfterRecord(t *testing.T) {
	t.Parallel()
	failed := fmt.Errorf("tasks: record outcome: %w", &pgconn.PgError{Code: "23514"})
	lost := errors.New("tasks: record outcome: unexpected EOF")
	taken := fmt.Errorf("tasks: record outcome: %w", &pgconn.PgError{Code: "23505"})
	cases := []struct {
		name string
		err  error
		c    recordCase
		want recordStep
	}{
		{"recorded", nil, recordCase{answer: true}, recordStep{done: true}},
		{"a retry decided", &retryError{&provider.Error{Class: provider.ClassTransient}}, recordCase{inline: true}, recordStep{done: true}},
		{"a snooze decided", river.JobSnooze(time.Second), recordCase{}, recordStep{done: true}},
		{"River run's answer not recorded: keep, River retries", failed, recordCase{answer: true}, recordStep{keep: true}},
		{"inline answer not recorded: keep, try again", lost, recordCase{answer: true, inline: true}, recordStep{keep: true, again: true}},
		{"kept already: try again only", lost, recordCase{answer: true, kept: true, inline: true}, recordStep{again: true}},
		{"River run recording a kept answer: River retries", failed, recordCase{answer: true, kept: true}, recordStep{}},
		{"a failure's outcome is not kept", failed, recordCase{inline: true}, recordStep{again: true}},
		{"recorded before, ack lost", taken, recordCase{answer: true, inline: true}, recordStep{done: true}},
		{"recorded before, ack lost, copy kept", taken, recordCase{answer: true, kept: true, inline: true}, recordStep{done: true, forget: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, afterRecord(c.err, c.c), cmp.AllowUnexported(recordStep{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPossibleCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		e    callEvidence
		want int
	}{
		{"nothing", callEvidence{}, 0},
		{"ambiguous attempts", callEvidence{ambiguous: 2}, 2},
		{"a sent entry", callEvidence{sent: []int32{1}}, 1},
		{"a kept answer and its sent entry counted once", callEvidence{sent: []int32{1}, kept: []int32{1}}, 1},
		{"a kept answer beside a call in flight", callEvidence{sent: []int32{1, 2}, kept: []int32{1}}, 2},
		{"all of them", callEvidence{ambiguous: 1, sent: []int32{2, 3}, kept: []int32{3}}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := possibleCalls(c.e); got != c.want {
				t.Errorf("possibleCalls = %d, want %d", got, c.want)
			}
		})
	}
}

// A kept answer comes back as the provider gave it, usage and stream
// delivery included.
func TestKeptBodyRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		resp   *provider.Response
		stream *replay.StreamInfo
	}{
		{withMeta(provider.TextResponse("answer", "stop"), "m-1", &provider.Usage{InputTokens: 6, OutputTokens: 3}, 200), nil},
		{withMeta(provider.TextResponse("no usage", ""), "", nil, 200), &replay.StreamInfo{ChunksSent: 2, ClientDisconnectedAt: &now}},
		{&provider.Response{Embeddings: [][]float32{{0.25, -1.5e-7, 3}, {0.1, 0, -0.3333333}}, Model: "e-1",
			Usage: &provider.Usage{InputTokens: 4}, Status: 200}, nil},
	}
	for _, c := range cases {
		b := keptBodyOf(c.resp, c.stream)
		if diff := cmp.Diff(c.resp, b.response()); diff != "" {
			t.Errorf("response mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(c.stream, b.Stream); diff != "" {
			t.Errorf("stream mismatch (-want +got):\n%s", diff)
		}
	}
}

func withMeta(r *provider.Response, model string, u *provider.Usage, status int) *provider.Response {
	r.Model, r.Usage, r.Status = model, u, status
	return r
}
