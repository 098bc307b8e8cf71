package extractorsvc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/extractor/extractorsvc/extractortest"
)

// TestConcurrencyUnderChaos is the extractor's central promise: with several
// workers, many sessions, requests arriving continuously and workers crashing,
// stopping and restarting at random, no two extractions of one session ever
// overlap (detected at the model), coveredSeq never moves backwards (watched
// in KV), and every request ends completed or parked.
func TestConcurrencyUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	const (
		workers  = 4
		sessions = 50
		publish  = 10 * time.Second
	)
	e := newEnv(t)
	p := extractortest.NewDetector(&extractortest.EditProvider{Delay: 40 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cw, err := extractortest.WatchCovered(ctx, e.js)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	live := map[string]*worker{}
	var all []*worker
	next := 0
	start := func() {
		mu.Lock()
		id := fmt.Sprintf("w%d", next)
		next++
		mu.Unlock()
		// Few slots per worker, so requests wait and are shared between
		// workers while they crash.
		cfg := testConfig(id)
		cfg.Concurrency = 2
		w := e.startWorker(t, cfg, p)
		mu.Lock()
		live[id] = w
		all = append(all, w)
		mu.Unlock()
	}
	for i := 0; i < workers; i++ {
		start()
	}
	initial := make([]*worker, 0, workers)
	for _, w := range live {
		initial = append(initial, w)
	}
	waitOwned(t, initial...)

	// Requests, continuously: append to a random session, request up to its
	// head.
	type req struct {
		session string
		upTo    uint64
	}
	var requested []req
	maxUpTo := map[string]uint64{}
	pubDone := make(chan struct{})
	var pubErr error // the publisher's first error, read after pubDone
	go func() {
		defer close(pubDone)
		rng := rand.New(rand.NewPCG(1, 2))
		for deadline := time.Now().Add(publish); time.Now().Before(deadline); {
			s := fmt.Sprintf("s%02d", rng.IntN(sessions))
			seqs, err := e.tryAppendMessages("acme", s, 2)
			if err == nil {
				err = e.tryRequest("acme", s, seqs[1])
			}
			if err != nil {
				pubErr = err
				return
			}
			requested = append(requested, req{s, seqs[1]})
			maxUpTo[s] = seqs[1]
			time.Sleep(time.Duration(5+rng.IntN(10)) * time.Millisecond)
		}
	}()

	// Chaos: every so often crash or stop a random worker and start a new
	// one a moment later.
	rng := rand.New(rand.NewPCG(3, 4))
	kills, stops := 0, 0
	for chaosEnd := time.Now().Add(publish); time.Now().Before(chaosEnd); {
		time.Sleep(time.Duration(700+rng.IntN(800)) * time.Millisecond)
		mu.Lock()
		var victim *worker
		for id, w := range live {
			victim = w
			delete(live, id)
			break
		}
		mu.Unlock()
		if rng.IntN(3) == 0 {
			victim.stop(t)
			stops++
		} else {
			victim.kill()
			kills++
		}
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		start()
	}
	<-pubDone
	if pubErr != nil {
		t.Fatalf("publishing requests: %v", pubErr)
	}
	t.Logf("published %d requests over %d sessions; %d crashes, %d clean stops", len(requested), len(maxUpTo), kills, stops)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		var shared uint64
		for _, w := range all {
			out, _ := w.w.group.Shared()
			shared += out
		}
		t.Logf("%d requests ran on another worker than their partition's owner", shared)
	}()

	// Every request ends completed or parked.
	outcome := func() (missing []req) {
		done := map[req]bool{}
		for _, c := range e.completed() {
			done[req{c.Session, c.UpToSeq}] = true
		}
		for _, f := range e.failed() {
			done[req{f.Session, f.UpToSeq}] = true
		}
		for _, r := range requested {
			if !done[r] {
				missing = append(missing, r)
			}
		}
		return missing
	}
	var left []req
	t.Cleanup(func() {
		if len(left) > 0 {
			t.Logf("%d of %d requests neither completed nor parked, e.g. %+v", len(left), len(requested), left[0])
		}
	})
	testpoll.UntilEvery(t, 40*time.Second, 100*time.Millisecond, "every request completed or parked", func() bool {
		left = outcome()
		return len(left) == 0
	})
	if o := p.Overlaps(); len(o) > 0 {
		t.Fatalf("%d overlapping extractions, e.g. %s", len(o), o[0])
	}
	if v := cw.Violations(); len(v) > 0 {
		t.Fatalf("coveredSeq moved backwards: %v", v)
	}
	for s, upTo := range maxUpTo {
		rec, _ := e.memory(t, "acme", s)
		if rec.CoveredSeq < upTo {
			t.Errorf("session %s covered up to %d, requested %d", s, rec.CoveredSeq, upTo)
		}
	}
	parked, _ := parked.List(context.Background(), e.js)
	t.Logf("%d LLM calls, %d completions, %d parked", p.Total(), len(e.completed()), len(parked))
	if p.Total() == 0 {
		t.Fatal("no LLM calls at all")
	}
	_ = events.KindExtractionCompleted
}
