//go:build faults

package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testdb"
)

// Scenario 4 figures, as the issue asks.
const (
	stormPosts   = 1000
	stormKeys    = 100
	stormChanged = 20 // keys that also receive a changed body
)

// TestDuplicateStorm fires 1,000 POSTs at once, spread over three instances
// and 100 idempotency keys (ten each); for 20 keys, three of the ten carry
// a changed body. Exactly one task per key must exist; every POST with the
// body that won its key must get that task, every POST with the other
// body a 422; and no provider call may go beyond the journal.
func TestDuplicateStorm(t *testing.T) {
	started := time.Now()
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	dbURL := testdb.New(t)
	fp := startFake(t, logDir)
	apiKey := newOwner(t, dbURL, "faults", 1_000_000_000_000)
	c := newCluster(t, logDir, 3, serveEnv(dbURL, fp.url+"/v1"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type post struct {
		key     int
		changed bool
		res     submitted
		err     error
	}
	posts := make([]post, stormPosts)
	perKey := stormPosts / stormKeys
	for i := range posts {
		k, j := i%stormKeys, i/stormKeys
		posts[i] = post{key: k, changed: k < stormChanged && j >= perKey-3}
	}
	var stats clientStats
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range posts {
		p := &posts[i]
		wg.Go(func() {
			body := taskBody(p.key, "storm")
			if p.changed {
				body = taskBody(p.key, "storm, changed")
			}
			<-gate
			p.res, p.err = submit(ctx, c.pick, apiKey, fmt.Sprintf("storm-%03d", p.key), body, &stats)
		})
	}
	close(gate)
	wg.Wait()
	stormTook := time.Since(started)

	// Per key: one task id for every 2xx, all of one body; 422 for every
	// POST of the other body; nothing else.
	type keyResult struct {
		ids     map[string]bool
		winner  map[bool]bool // bodies (changed or not) that got a 2xx
		loser   map[bool]int  // bodies that got 422
		created int
	}
	keys := map[int]*keyResult{}
	accepted := map[string]bool{}
	replayed, refused, changedWon := 0, 0, 0
	for _, p := range posts {
		kr := keys[p.key]
		if kr == nil {
			kr = &keyResult{ids: map[string]bool{}, winner: map[bool]bool{}, loser: map[bool]int{}}
			keys[p.key] = kr
		}
		switch {
		case p.err != nil:
			t.Errorf("key %d: %v", p.key, p.err)
		case p.res.taskID != "":
			kr.ids[p.res.taskID] = true
			kr.winner[p.changed] = true
			accepted[p.res.taskID] = true
			if p.res.replayed {
				replayed++
			} else {
				kr.created++
			}
		case p.res.status == 422 && p.res.code == "idempotency_key_reused":
			kr.loser[p.changed]++
			refused++
		default:
			t.Errorf("key %d (changed body %v): final status %d %s, want 2xx or 422 idempotency_key_reused", p.key, p.changed, p.res.status, p.res.code)
		}
	}
	for k, kr := range keys {
		if len(kr.ids) != 1 {
			t.Errorf("key %d: POSTs were given %d different tasks, want 1", k, len(kr.ids))
		}
		if len(kr.winner) != 1 {
			t.Errorf("key %d: both bodies were accepted", k)
		}
		for body := range kr.winner {
			if kr.loser[body] > 0 {
				t.Errorf("key %d: the winning body got %d 422s", k, kr.loser[body])
			}
			if body {
				changedWon++
			}
		}
		wantRefused := 0
		if k < stormChanged {
			wantRefused = 3 // the changed bodies lost
			if kr.winner[true] {
				wantRefused = perKey - 3 // the changed body won the race
			}
		}
		if kr.loser[!kr.winner[true]] != wantRefused {
			t.Errorf("key %d: %d POSTs refused with 422, want %d", k, kr.loser[!kr.winner[true]], wantRefused)
		}
		if stats.transport == 0 && kr.created != 1 {
			t.Errorf("key %d: %d POSTs report creating the task, want exactly 1", k, kr.created)
		}
	}

	counts := waitFinal(t, dbURL, time.Minute)
	if crashed := c.crashed(); len(crashed) > 0 {
		t.Errorf("instances exited on their own: %v", crashed)
	}
	finish(t, row{
		scenario:   "4 duplicate storm, 3 instances",
		tasks:      len(accepted),
		duplicates: replayed + refused,
		notes: fmt.Sprintf("%d POSTs over %d keys answered in %s: %d created, %d replayed, %d refused 422 (changed body won %d of %d races); final %v; clients: %s",
			stormPosts, stormKeys, stormTook.Round(100*time.Millisecond), stormPosts-replayed-refused, replayed, refused, changedWon, stormChanged, counts, &stats),
	}, outcome{dbURL: dbURL, calls: fp.calls(t), accepted: accepted, wantTasks: stormKeys}, started)
}
