package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
)

// eventIDRE finds event ids ("s0042-e00017") in texts.
var eventIDRE = regexp.MustCompile(`\b(acme|globex):(s[0-9]{4})-e[0-9]{5}`)

// compactionProbe asks for compactions of random sessions all through the
// run and checks every answer.
type compactionProbe struct {
	nc       *nats.Conn
	timeout  time.Duration
	sessions map[string]int // tenant -> sessions

	served, notServed, transportErrs, hangs, wrongData atomic.Int64
	maxLatency                                         atomic.Int64 // microseconds
	mu                                                 sync.Mutex
	outcomes                                           map[string]int
	errs                                               map[string]int
	firstWrong                                         string
	maxServerUS                                        int64 // longest compactor-side duration reported
}

func (p *compactionProbe) run(ctx context.Context, t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tenants := make([]string, 0, len(p.sessions))
	for tn := range p.sessions {
		tenants = append(tenants, tn)
	}
	sort.Strings(tenants)
	for ctx.Err() == nil {
		tn := tenants[rng.IntN(len(tenants))]
		s := sessionID(rng.IntN(p.sessions[tn]))
		p.once(ctx, tn, s)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *compactionProbe) once(ctx context.Context, tenant, session string) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	// A platform compacts when its context is full: it says how full (the
	// sessions here are small, and a compaction must end smaller than the
	// context it replaces).
	msg, err := chunked.Request(rctx, p.nc, events.APISubject(events.VerbCompact, tenant, session), nil, []byte(`{"context_tokens":150000}`))
	cancel()
	el := time.Since(start)
	if us := el.Microseconds(); us > p.maxLatency.Load() {
		p.maxLatency.Store(us)
	}
	// The client's deadline bounds the wait; only a call that outlives it
	// by more than scheduling noise on a loaded machine is a hang.
	if el > p.timeout+3*time.Second {
		p.hangs.Add(1)
	}
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.transportErrs.Add(1)
		p.errs[errClass(err)]++
		return
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		p.transportErrs.Add(1)
		p.errs["service error "+code+": "+msg.Header.Get("Nats-Service-Error")]++
		return
	}
	var r events.CompactReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		p.wrong(fmt.Sprintf("%s/%s: undecodable reply: %v", tenant, session, err))
		return
	}
	p.outcomes[r.Outcome]++
	if r.DurationUS > p.maxServerUS {
		p.maxServerUS = r.DurationUS
	}
	if !r.Served {
		p.notServed.Add(1)
		return
	}
	p.served.Add(1)
	for _, e := range r.Kept {
		// A synthetic record (an interrupted call's result, added so the
		// context is valid for the model) has Recall's id, not the platform's.
		synthetic := e.Extensions()[events.ExtSynthetic] != nil
		if e.Subject() != session || e.Extensions()[events.ExtTenant] != tenant || (!synthetic && !strings.HasPrefix(e.ID(), session+"-")) {
			p.wrong(fmt.Sprintf("%s/%s: kept record %s of %v/%s", tenant, session, e.ID(), e.Extensions()[events.ExtTenant], e.Subject()))
			return
		}
	}
	if r.Summary != nil {
		for _, b := range r.Summary.Content {
			for _, m := range eventIDRE.FindAllStringSubmatch(b.Text, -1) {
				if m[1] != tenant || m[2] != session {
					p.wrong(fmt.Sprintf("%s/%s: summary mentions %s", tenant, session, m[0]))
					return
				}
			}
		}
	}
}

func (p *compactionProbe) wrong(s string) {
	p.wrongData.Add(1)
	if p.firstWrong == "" {
		p.firstWrong = s
	}
}

func errClass(err error) string {
	switch {
	case errors.Is(err, chunked.ErrNoResponders):
		return "no responders"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining):
		return "connection: " + err.Error()
	}
	return err.Error()
}

// coveredWatch follows RECALL_MEMORY and counts coveredSeq moving backwards.
type coveredWatch struct {
	mu        sync.Mutex
	last      map[string]uint64
	updates   int
	backwards int
	first     string
	restarts  int
}

func (w *coveredWatch) run(ctx context.Context, js jetstream.JetStream) {
	for ctx.Err() == nil {
		w.follow(ctx, js)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		w.mu.Lock()
		w.restarts++
		w.mu.Unlock()
	}
}

func (w *coveredWatch) follow(ctx context.Context, js jetstream.JetStream) {
	kv, err := js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return
	}
	watcher, err := kv.WatchAll(ctx)
	if err != nil {
		return
	}
	defer watcher.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-watcher.Updates():
			if !ok {
				return
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec events.MemoryRecord
			if json.Unmarshal(e.Value(), &rec) != nil {
				continue
			}
			w.mu.Lock()
			w.updates++
			if prev, ok := w.last[e.Key()]; ok && rec.CoveredSeq < prev {
				w.backwards++
				if w.first == "" {
					w.first = fmt.Sprintf("%s: coveredSeq %d after %d (revision %d)", e.Key(), rec.CoveredSeq, prev, e.Revision())
				}
			}
			if rec.CoveredSeq > w.last[e.Key()] {
				w.last[e.Key()] = rec.CoveredSeq
			}
			w.mu.Unlock()
		}
	}
}

// lifecycle is what RECALL_EVENTS says about extractions.
type lifecycle struct {
	requested map[[2]string][]uint64 // tenant/session -> up_to_seq
	covered   map[[2]string]uint64   // best covered_seq of completed events
	completed int
	skipped   int
	failed    []events.ExtractionFailed
	compacted int
}

func readLifecycle(t *testing.T, js jetstream.JetStream) lifecycle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lc := lifecycle{requested: map[[2]string][]uint64{}, covered: map[[2]string]uint64{}}
	cons, err := js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	remaining := info.NumPending
	for remaining > 0 {
		batch, err := cons.Fetch(int(min(remaining, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			remaining--
			e, err := natsce.Decode(nats.Header(m.Headers()), m.Data())
			if err != nil {
				t.Fatalf("undecodable lifecycle event on %s: %v", m.Subject(), err)
			}
			switch e.Type() {
			case events.TypeExtractionRequested:
				var r events.ExtractionRequested
				_ = json.Unmarshal(e.Data(), &r)
				k := [2]string{r.Tenant, r.Session}
				lc.requested[k] = append(lc.requested[k], r.UpToSeq)
			case events.TypeExtractionCompleted:
				var c events.ExtractionCompleted
				_ = json.Unmarshal(e.Data(), &c)
				lc.completed++
				if c.Skipped {
					lc.skipped++
				}
				k := [2]string{c.Tenant, c.Session}
				lc.covered[k] = max(lc.covered[k], c.CoveredSeq, c.UpToSeq)
			case events.TypeExtractionFailed:
				var f events.ExtractionFailed
				_ = json.Unmarshal(e.Data(), &f)
				lc.failed = append(lc.failed, f)
			case events.TypeCompactionServed:
				lc.compacted++
			}
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("reading %s: %d events left but none delivered", events.StreamEvents, remaining)
		}
	}
	return lc
}

// TestChaos runs the whole pipeline under load while trigger, extractor and
// compactor instances are killed and restarted at random and the NATS
// server is restarted twice (file store), then checks that nothing was
// lost, duplicated, overlapped or moved backwards.
func TestChaos(t *testing.T) {
	began := time.Now()
	stale0, concurrent0 := extractorsvc.FenceDiscards()
	h := newHarness(t)
	det := newOverlapDetector(llm.NewOffline(), 15*time.Millisecond)
	h.Provider = det

	kinds := map[string]func() *proc{"trigger": h.startTrigger, "extractor": h.startExtractor, "compactor": h.startCompactor}
	running := map[string][]*proc{}
	for _, k := range []string{"trigger", "extractor", "compactor"} {
		for i := 0; i < 2; i++ {
			running[k] = append(running[k], kinds[k]())
		}
	}

	// Load: tenant A 100 sessions x 200 events; tenant B reuses A's first
	// 10 session ids (same ids, other tenant) with 100 events each.
	loadA := &loadGen{Tenant: tenantA, Sessions: 100, PerSession: 200, Batch: 20, Workers: 8, TextBytes: 60, DupEvery: 10, Pause: 10 * time.Millisecond, Ordered: true}
	loadB := &loadGen{Tenant: tenantB, Sessions: 10, PerSession: 100, Batch: 20, Workers: 2, TextBytes: 60, DupEvery: 10, Pause: 10 * time.Millisecond}
	var jss []jetstream.JetStream
	for i := 0; i < 4; i++ {
		_, js := h.srv.Connect(t)
		jss = append(jss, js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	loadErr := make(chan error, 2)
	loadsDone := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, g := range []*loadGen{loadA, loadB} {
			wg.Add(1)
			go func(g *loadGen) { defer wg.Done(); loadErr <- g.Run(ctx, jss) }(g)
		}
		wg.Wait()
		close(loadsDone)
	}()

	probeNC, _ := h.srv.Connect(t)
	probe := &compactionProbe{nc: probeNC, timeout: 6 * time.Second, sessions: map[string]int{tenantA: loadA.Sessions, tenantB: loadB.Sessions},
		outcomes: map[string]int{}, errs: map[string]int{}}
	watchJS := jss[0]
	cw := &coveredWatch{last: map[string]uint64{}}
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	bgWG.Add(2)
	go func() { defer bgWG.Done(); probe.run(bg, t) }()
	go func() { defer bgWG.Done(); cw.run(bg, watchJS) }()

	// Faults, on the test goroutine.
	rng := rand.New(rand.NewPCG(1, 2))
	total := int64(loadA.Total() + loadB.Total())
	progress := func() float64 { return float64(loadA.Published.Load()+loadB.Published.Load()) / float64(total) }
	kills := map[string]int{}
	var stopErrs []string
	natsRestarts := 0
	var natsRestartTimes []time.Duration
	restartNATS := func() {
		t0 := time.Now()
		h.srv.Restart(t)
		natsRestarts++
		natsRestartTimes = append(natsRestartTimes, time.Since(t0))
		t.Logf("NATS restarted at %.0f%% of the load (%v)", 100*progress(), time.Since(t0))
	}
	killOne := func() {
		names := []string{"trigger", "extractor", "compactor"}
		k := names[rng.IntN(len(names))]
		i := rng.IntN(len(running[k]))
		if err := running[k][i].stop(15 * time.Second); err != nil {
			stopErrs = append(stopErrs, fmt.Sprintf("%s: %v", running[k][i].name, err))
			t.Logf("stopping %s: %v", running[k][i].name, err)
		}
		kills[k]++
		running[k][i] = kinds[k]()
	}
loop:
	for {
		select {
		case <-loadsDone:
			break loop
		case <-time.After(time.Duration(500+rng.IntN(1000)) * time.Millisecond):
		}
		switch p := progress(); {
		case natsRestarts == 0 && p >= 0.30, natsRestarts == 1 && p >= 0.65:
			restartNATS()
		default:
			killOne()
		}
	}
	for natsRestarts < 2 {
		t.Log("the load finished before the second NATS restart; restarting now")
		restartNATS()
	}
	close(loadErr)
	for err := range loadErr {
		if err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	loadTime := time.Since(began)
	t.Logf("load done after %v", loadTime)

	// Settle: the trigger has read everything, the work queue is empty and
	// nothing is running, for a few consecutive checks.
	stable := 0
	defer func() {
		if t.Failed() {
			t.Logf("pipeline state: %s", pipelineState(h.js))
		}
	}()
	testpoll.Until(t, 60*time.Second, "the pipeline to settle", func() bool {
		if settled(h.js) {
			stable++
		} else {
			stable = 0
		}
		return stable >= 5
	})

	stopBG()
	bgWG.Wait()
	settleTime := time.Since(began) - loadTime

	// 1. Every accepted event stored exactly once.
	stA := verifyStoredOnce(t, h.admin, loadA, false)
	stB := verifyStoredOnce(t, h.admin, loadB, false)
	// Tenant A publishes with client.Ordered: across NATS restarts none of
	// its sessions may be stored out of order (tenant B's pipelined
	// batches may be, and are only counted).
	if stA.Reordered != 0 {
		t.Errorf("%d of tenant A's sessions stored out of order (first: %s)", stA.Reordered, stA.FirstReorder)
	}

	// 2. Every extraction request completed or parked (and listed).
	lc := readLifecycle(t, h.js)
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	list, err := parked.List(lctx, h.js)
	lcancel()
	if err != nil {
		t.Fatal(err)
	}
	parkedKeys := map[string]bool{}
	for _, p := range list {
		parkedKeys[p.Key] = true
	}
	memKV, err := h.js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	requests, uncovered := 0, 0
	for k, ups := range lc.requested {
		rec, rev := readMemory(t, memKV, events.MemoryKey(k[0], k[1]))
		for _, u := range ups {
			requests++
			if lc.covered[k] >= u && rec.CoveredSeq >= u {
				continue
			}
			if parkedKeys[parked.Key(k[0], k[1], u)] {
				continue
			}
			uncovered++
			if uncovered <= 5 {
				t.Errorf("request %s/%s up to %d: neither completed (events cover %d, memory revision %d covers %d) nor parked",
					k[0], k[1], u, lc.covered[k], rev, rec.CoveredSeq)
			}
		}
	}
	for _, f := range lc.failed {
		if f.Parked && !parkedKeys[parked.Key(f.Tenant, f.Session, f.UpToSeq)] {
			// A parked request may have been replayed since; it is listed
			// until then.
			t.Errorf("extraction of %s/%s up to %d reported parked but not listed", f.Tenant, f.Session, f.UpToSeq)
		}
	}
	if requests == 0 {
		t.Fatal("no extraction was requested: the chaos run exercised nothing")
	}

	// 3. No two extractions of a session overlapped.
	if n := det.overlaps.Load(); n > 0 {
		t.Errorf("%d overlapping extraction calls; first: %s", n, det.First())
	}

	// 4. coveredSeq never went backwards: the watcher, and every kept
	// revision of every session.
	cw.mu.Lock()
	if cw.backwards > 0 {
		t.Errorf("coveredSeq moved backwards %d times; first: %s", cw.backwards, cw.first)
	}
	watchUpdates, watchRestarts := cw.updates, cw.restarts
	cw.mu.Unlock()
	revisions, histBackwards := checkHistories(t, memKV)
	if histBackwards > 0 {
		t.Errorf("coveredSeq moved backwards in %d kept revisions", histBackwards)
	}

	// 5. Compaction answered throughout, never hung, never leaked.
	if n := probe.wrongData.Load(); n > 0 {
		t.Errorf("%d compactions returned another session's data; first: %s", n, probe.firstWrong)
	}
	if n := probe.hangs.Load(); n > 0 {
		t.Errorf("%d compactions took longer than their %v timeout", n, probe.timeout)
	}
	if probe.served.Load() == 0 {
		t.Error("no compaction was served from session memory during the run")
	}

	// 6. Nothing left running.
	stctx, stcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stcancel()
	stKV, _ := h.js.KeyValue(stctx, events.BucketStatus)
	keys, _ := stKV.ListKeys(stctx)
	var leftover []string
	for k := range keys.Keys() {
		leftover = append(leftover, k)
	}
	if len(leftover) > 0 {
		t.Errorf("status records left after the run: %v", leftover)
	}

	// 7. Every instance stops cleanly (Run returns nil) within 10 s.
	var smu sync.Mutex
	var swg sync.WaitGroup
	for _, ps := range running {
		for _, p := range ps {
			swg.Add(1)
			go func(p *proc) {
				defer swg.Done()
				if err := p.stop(10 * time.Second); err != nil {
					smu.Lock()
					stopErrs = append(stopErrs, fmt.Sprintf("%s (final): %v", p.name, err))
					smu.Unlock()
				}
			}(p)
		}
	}
	swg.Wait()

	el := time.Since(began)
	stale, concurrent := extractorsvc.FenceDiscards()
	stale, concurrent = stale-stale0, concurrent-concurrent0
	probe.mu.Lock()
	figures := []string{
		fmt.Sprintf("events published %d (A %d, B %d), stored once %d, duplicate acks %d, re-sent batches %d, retried batches %d, publish errors %d, sessions reordered by retries %d",
			loadA.Published.Load()+loadB.Published.Load(), loadA.Published.Load(), loadB.Published.Load(), stA.Stored+stB.Stored,
			loadA.Duplicates.Load()+loadB.Duplicates.Load(), loadA.DupBatches.Load()+loadB.DupBatches.Load(),
			loadA.Retries.Load()+loadB.Retries.Load(), loadA.Errors.Load()+loadB.Errors.Load(), stA.Reordered+stB.Reordered),
		fmt.Sprintf("restarts: NATS %d (%v), trigger %d, extractor %d, compactor %d; unclean stops %d %v", natsRestarts, natsRestartTimes, kills["trigger"], kills["extractor"], kills["compactor"], len(stopErrs), stopErrs),
		fmt.Sprintf("extractions: requests %d, completed events %d (skipped %d), failed %d, parked %d, uncovered %d, model calls %d (errors %d) over %d sessions, overlaps %d",
			requests, lc.completed, lc.skipped, len(lc.failed), len(list), uncovered, det.calls.Load(), det.errors.Load(), countMap(&det.sessions), det.overlaps.Load()),
		fmt.Sprintf("fence discards (results thrown away by the fenced commit, recall_extraction_fence_discards_total): %d (stale read %d, concurrent commit %d)", stale+concurrent, stale, concurrent),
		fmt.Sprintf("coveredSeq: %d watched updates (%d watcher restarts), %d kept revisions checked, backwards %d", watchUpdates, watchRestarts, revisions, cw.backwards+histBackwards),
		fmt.Sprintf("compaction: served %d, not served %d %v, errors %d %v, hangs %d, wrong data %d, max latency %v (compactor-side %v)",
			probe.served.Load(), probe.notServed.Load(), probe.outcomes, probe.transportErrs.Load(), probe.errs, probe.hangs.Load(), probe.wrongData.Load(),
			time.Duration(probe.maxLatency.Load())*time.Microsecond, time.Duration(probe.maxServerUS)*time.Microsecond),
		fmt.Sprintf("time: load %v, settle %v, total %v", loadTime.Round(time.Millisecond), settleTime.Round(time.Millisecond), el.Round(time.Millisecond)),
	}
	probe.mu.Unlock()
	for _, f := range figures {
		t.Log(f)
	}
	fmt.Printf("RELIABILITY chaos: events=%d restarts(nats=%d trigger=%d extractor=%d compactor=%d) errors(publish=%d compaction=%d) extractions(requests=%d completed=%d failed=%d parked=%d model_calls=%d overlaps=%d fence_discards=%d stale_read=%d) compactions(served=%d wrong=%d hangs=%d) time=%v\n",
		stA.Stored+stB.Stored, natsRestarts, kills["trigger"], kills["extractor"], kills["compactor"],
		loadA.Errors.Load()+loadB.Errors.Load(), probe.transportErrs.Load(),
		requests, lc.completed, len(lc.failed), len(list), det.calls.Load(), det.overlaps.Load(), stale+concurrent, stale,
		probe.served.Load(), probe.wrongData.Load(), probe.hangs.Load(), el.Round(time.Millisecond))
}

func readMemory(t *testing.T, kv jetstream.KeyValue, key string) (events.MemoryRecord, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.MemoryRecord{}, 0
	}
	if err != nil {
		t.Fatalf("reading memory %s: %v", key, err)
	}
	var rec events.MemoryRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatalf("memory %s: %v", key, err)
	}
	return rec, e.Revision()
}

// checkHistories walks every kept revision of every memory key and counts
// coveredSeq moving backwards between consecutive revisions.
func checkHistories(t *testing.T, kv jetstream.KeyValue) (revisions, backwards int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		hist, err := kv.History(ctx, k)
		if err != nil {
			t.Fatalf("history of %s: %v", k, err)
		}
		var prev uint64
		for _, e := range hist {
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			revisions++
			var rec events.MemoryRecord
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				t.Fatalf("memory %s revision %d: %v", k, e.Revision(), err)
			}
			if rec.CoveredSeq < prev {
				backwards++
				t.Errorf("%s revision %d: coveredSeq %d after %d", k, e.Revision(), rec.CoveredSeq, prev)
			}
			prev = max(prev, rec.CoveredSeq)
		}
	}
	return revisions, backwards
}
