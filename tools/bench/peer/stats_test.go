package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	// Unsorted on purpose: summarize sorts a copy.
	lat := []time.Duration{4 * time.Millisecond, 1 * time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	got := summarize(lat, 1, 2*time.Second)
	want := summary{N: 4, Errors: 1, Mean: 2.5, P50: 2, P90: 4, P99: 4, Max: 4, PerSecond: 2}
	if got != want {
		t.Errorf("summarize mismatch:\n got %+v\nwant %+v", got, want)
	}
	if lat[0] != 4*time.Millisecond {
		t.Errorf("summarize reordered its input: %v", lat)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	t.Parallel()
	got := summarize(nil, 3, 0)
	if want := (summary{Errors: 3}); got != want {
		t.Errorf("summarize(nil) = %+v, want %+v", got, want)
	}
}

func TestAddedOver(t *testing.T) {
	t.Parallel()
	direct := summary{P50: 0.2, P99: 0.9}
	gw := summary{P50: 1.4, P99: 3.1}
	got := addedOver("portkey", gw, direct)
	want := added{Gateway: "portkey", P50: 1.2, P99: 2.2}
	if got != want {
		t.Errorf("addedOver = %+v, want %+v", got, want)
	}
}

func TestAddedLatency(t *testing.T) {
	t.Parallel()
	rs := []targetResult{
		{Name: "fake", Label: "fake direct", Summary: summary{P50: 0.25, P99: 1}},
		{Name: "portkey", Label: "Portkey", Summary: summary{P50: 1.25, P99: 4}},
		{Name: "tollgate", Label: "Tollgate", Summary: summary{P50: 3, P99: 9.5}},
	}
	got := addedLatency(rs)
	want := []added{{Gateway: "Portkey", P50: 1, P99: 3}, {Gateway: "Tollgate", P50: 2.75, P99: 8.5}}
	if len(got) != len(want) {
		t.Fatalf("addedLatency = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("addedLatency[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := addedLatency(rs[1:]); got != nil {
		t.Errorf("addedLatency without the fake = %+v, want nil", got)
	}
}

func TestBySecond(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	sched := []time.Duration{0, 500 * ms, 999 * ms, 1000 * ms, 2500 * ms}
	lat := []time.Duration{9 * ms, 1 * ms, 5 * ms, 2 * ms, 3 * ms}
	got := bySecond(sched, lat)
	want := []second{{Second: 0, N: 3, P50: 5, Max: 9}, {Second: 1, N: 1, P50: 2, Max: 2}, {Second: 2, N: 1, P50: 3, Max: 3}}
	if len(got) != len(want) {
		t.Fatalf("bySecond = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bySecond[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := bySecond(nil, nil); len(got) != 0 {
		t.Errorf("bySecond(nil) = %+v, want empty", got)
	}
}
