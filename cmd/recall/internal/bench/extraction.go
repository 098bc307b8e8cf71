package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
)

const (
	// extractMessages is the transcript length of each extraction session.
	extractMessages = 8
	// worklogDesc is the description line of the template's Worklog
	// section: the fake model's edits insert after it, so every edit
	// applies however many came before.
	worklogDesc = "_Step by step, what was attempted, done? Very terse summary for each step_\n"
)

var notesPathRE = regexp.MustCompile(`recall://` + benchTenant + `/([A-Za-z0-9_-]+)/memory\.md`)

// fakeModel is the fake LLM: an HTTP-level Anthropic Messages API with a
// fixed latency whose every answer is one valid Edit of the session's notes.
// It records, per session, overlapping model calls (a call arriving while
// another call of the same session is still within its fixed latency).
type fakeModel struct {
	srv      *llmtest.Server
	tb       *benchTB
	latency  time.Duration
	mu       sync.Mutex
	busy     map[string]time.Time // session -> end of its latest call
	overlaps []string
}

func newFakeModel(latency time.Duration) *fakeModel {
	f := &fakeModel{tb: &benchTB{}, latency: latency, busy: map[string]time.Time{}}
	f.srv = llmtest.NewAnthropic(f.tb)
	f.srv.SetLatency(latency)
	f.srv.SetResponder(f.respond)
	return f
}

func (f *fakeModel) close() { f.tb.cleanup() }

func (f *fakeModel) respond(call int, body []byte) llmtest.Reply {
	m := notesPathRE.FindSubmatch(body)
	if m == nil {
		return llmtest.Reply{Status: 400}
	}
	session := string(m[1])
	now := time.Now()
	f.mu.Lock()
	if end, ok := f.busy[session]; ok && now.Before(end) {
		f.overlaps = append(f.overlaps, fmt.Sprintf("session %s: model call %d started %s before the previous one ended", session, call, end.Sub(now).Round(time.Millisecond)))
	}
	f.busy[session] = now.Add(f.latency)
	f.mu.Unlock()
	path := memory.NotesPath(benchTenant, session)
	in, _ := json.Marshal(memory.EditInput{FilePath: path, OldString: worklogDesc, NewString: fmt.Sprintf("%s- step %d\n", worklogDesc, call)})
	return llmtest.Reply{
		ToolCalls: []llmtest.ToolCall{{Name: memory.EditToolName, Input: string(in)}},
		Usage:     llmtest.Usage{Input: 3000, Output: 60, CacheRead: 2000},
	}
}

// benchTB lets llmtest's fakes run outside tests: the only methods they
// call are Helper and Cleanup (and Fatalf on misuse).
type benchTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (b *benchTB) Helper() {}
func (b *benchTB) Cleanup(f func()) {
	b.mu.Lock()
	b.cleanups = append(b.cleanups, f)
	b.mu.Unlock()
}
func (b *benchTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (b *benchTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (b *benchTB) Logf(string, ...any)               {}
func (b *benchTB) cleanup() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
}

func runExtraction(ctx context.Context, e *env) error {
	r := &e.res.Extraction
	r.LLMLatencyMS = int(e.sizes.extractLatency / time.Millisecond)
	r.Sessions = e.sizes.extractSessions
	r.PerWorker = e.sizes.extractPerWorker
	fake := newFakeModel(e.sizes.extractLatency)
	defer fake.close()
	provider := llm.NewAnthropic(llm.ClientOptions{APIKey: "bench", BaseURL: fake.srv.BaseURL(), Model: "bench-model"})

	total := 0
	var examples []string
	for i, workers := range e.sizes.extractWorkers {
		if i > 0 {
			if err := e.reset(ctx); err != nil {
				return err
			}
		}
		step, ex, err := extractionStep(ctx, e, provider, workers)
		if err != nil {
			return fmt.Errorf("%d workers: %w", workers, err)
		}
		r.Scaling = append(r.Scaling, step)
		total += step.OrderingProblems
		examples = append(examples, ex...)
	}
	fake.mu.Lock()
	total += len(fake.overlaps)
	examples = append(examples, fake.overlaps...)
	fake.mu.Unlock()
	base := r.Scaling[0].ExtractionsPerS / float64(r.Scaling[0].Workers)
	for i := range r.Scaling {
		s := &r.Scaling[i]
		s.Efficiency = round3(s.ExtractionsPerS / (float64(s.Workers) * base))
		e.progress("   %d workers: %.1f extractions/s (%.0f%% of their capacity %.0f/s), efficiency %.3f (without sharing the session balance bounds it to %.3f: busiest worker owns %d of %d sessions; %d extractions shared)",
			s.Workers, s.ExtractionsPerS, 100*s.Utilization, s.CapacityPerS, s.Efficiency, s.EfficiencyBound, s.BusiestWorkerSessions, r.Sessions, s.Shared)
	}
	r.OrderingViolations = ptrInt(total)
	long, err := runLongSession(ctx, e, provider)
	if err != nil {
		return fmt.Errorf("long session: %w", err)
	}
	r.LongSession = long
	for _, s := range long {
		e.progress("   long session, extraction up to record %d: read from seq %d, %d model calls, %.0f ms besides the model", s.Records, s.ReadFrom, s.Parts, s.OverheadMS)
	}
	if len(examples) > 5 {
		examples = examples[:5]
	}
	r.ViolationExamples = examples
	return nil
}

// completion is one extraction outcome seen on RECALL_EVENTS.
type completion struct {
	session string
	covered uint64
	upTo    uint64
	skipped bool
	worker  string // the worker that ran it
	failed  string
	at      time.Time
}

// extractionStep runs one worker count: pre-fill, start the workers, wait
// until every partition has a worker pulling, publish two requests per
// session and wait for every outcome.
func extractionStep(ctx context.Context, e *env, provider llm.Provider, workers int) (ExtractionStep, []string, error) {
	step := ExtractionStep{Workers: workers}
	sessions := benchgen.SessionIDs(fmt.Sprintf("x%d_", workers), e.sizes.extractSessions)
	seqs, err := fillExtractionSessions(ctx, e, sessions)
	if err != nil {
		return step, nil, err
	}
	stop, err := startExtractors(ctx, e, provider, workers)
	defer stop()
	if err != nil {
		return step, nil, err
	}
	col, err := collectOutcomes(e, 2*len(sessions))
	if err != nil {
		return step, nil, err
	}
	defer col.close()

	limit := 30*time.Second + time.Duration(4*len(sessions)/workers/e.sizes.extractPerWorker+4)*e.sizes.extractLatency
	start := time.Now()
	if err := requestExtractions(ctx, e, sessions, seqs); err != nil {
		return step, nil, err
	}
	outs, err := col.wait(ctx, limit)
	if err != nil {
		return step, nil, err
	}
	last, problems := judgeOutcomes(&step, outs, sessions, seqs)
	step.BusiestWorkerSessions = busiestWorker(sessions, workers, e.provisionConfig().Partitions)
	step.Shared = countShared(outs, sessionOwners(sessions, workers, e.provisionConfig().Partitions))
	per := e.sizes.extractPerWorker
	waves := func(n int) float64 { return float64((n + per - 1) / per) }
	step.EfficiencyBound = round3(waves(len(sessions)) / float64(workers) / waves(step.BusiestWorkerSessions))
	step.ExtractionsPerS = round3(rate(step.Extractions, last.Sub(start)))
	step.CapacityPerS = round3(float64(workers*per) / e.sizes.extractLatency.Seconds())
	step.Utilization = round3(step.ExtractionsPerS / step.CapacityPerS)
	e.progress("   %d workers: %d extractions (%d outcomes) in %s", workers, step.Extractions, len(outs), last.Sub(start).Round(time.Millisecond))
	return step, problems, nil
}

// fillExtractionSessions stores extractMessages records for each session
// and returns each session's stream sequences, in order.
func fillExtractionSessions(ctx context.Context, e *env, sessions []string) (map[string][]uint64, error) {
	plan := fillPlan{sessions: sessions, counts: make([]int, len(sessions))}
	for i := range plan.counts {
		plan.counts[i] = extractMessages
	}
	seqs := map[string][]uint64{}
	var mu sync.Mutex
	_, err := e.fill(ctx, benchgen.New(11), plan, func(s string, seq uint64) {
		mu.Lock()
		seqs[s] = append(seqs[s], seq)
		mu.Unlock()
	})
	return seqs, err
}

// startExtractors starts workers extractor services and waits until every
// partition has a worker pulling. stop (always set) stops them all at once.
func startExtractors(ctx context.Context, e *env, provider llm.Provider, workers int) (stop func(), err error) {
	var svcs []*service
	stop = func() {
		t0 := time.Now()
		for _, s := range svcs {
			s.cancel() // stop them all at once, then wait
		}
		for _, s := range svcs {
			_ = s.stop()
		}
		e.progress("   %d workers stopped in %s", workers, time.Since(t0).Round(time.Millisecond))
	}
	for w := 0; w < workers; w++ {
		cfg := extractorsvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig(), Provider: provider,
			WorkerID: fmt.Sprintf("bench-%d-%d", workers, w), Concurrency: e.sizes.extractPerWorker, FetchWait: time.Second}
		svc, err := startService(ctx, "extractor", func(ctx context.Context) error {
			return extractorsvc.Run(ctx, cfg, e.log.With("service", "extractor", "worker", cfg.WorkerID))
		}, nil)
		if err != nil {
			return stop, err
		}
		svcs = append(svcs, svc)
	}
	t0 := time.Now()
	if err := waitWorkers(ctx, e, workers, svcs); err != nil {
		return stop, err
	}
	e.progress("   %d workers own every partition after %s", workers, time.Since(t0).Round(time.Millisecond))
	return stop, nil
}

// outcomes collects the extraction outcome events of the bench tenant.
type outcomes struct {
	mu   sync.Mutex
	outs []completion
	want int
	done chan struct{}
	subs []*nats.Subscription
}

// collectOutcomes subscribes to the completion and failure events until
// want of them arrived.
func collectOutcomes(e *env, want int) (*outcomes, error) {
	o := &outcomes{want: want, done: make(chan struct{})}
	for _, kind := range []string{events.KindExtractionCompleted, events.KindExtractionFailed} {
		sub, err := e.nc.Subscribe(events.EventsSubject(kind, benchTenant, "*"), o.onEvent)
		if err != nil {
			o.close()
			return nil, err
		}
		o.subs = append(o.subs, sub)
	}
	if err := e.nc.Flush(); err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *outcomes) onEvent(m *nats.Msg) {
	ev, err := natsce.FromMsg(m)
	if err != nil {
		return
	}
	c := completion{at: time.Now()}
	switch ev.Type() {
	case events.TypeExtractionCompleted:
		var d events.ExtractionCompleted
		if json.Unmarshal(ev.Data(), &d) != nil {
			return
		}
		c.session, c.covered, c.upTo, c.skipped, c.worker = d.Session, d.CoveredSeq, d.UpToSeq, d.Skipped, d.Worker
	case events.TypeExtractionFailed:
		var d events.ExtractionFailed
		if json.Unmarshal(ev.Data(), &d) != nil {
			return
		}
		c.session, c.upTo, c.failed = d.Session, d.UpToSeq, d.Error
	default:
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outs = append(o.outs, c)
	if len(o.outs) == o.want {
		close(o.done)
	}
}

// wait returns the outcomes once want arrived, or an error after limit.
func (o *outcomes) wait(ctx context.Context, limit time.Duration) ([]completion, error) {
	select {
	case <-o.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(limit):
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.outs) < o.want {
		return nil, fmt.Errorf("%d of %d extraction outcomes within %s", len(o.outs), o.want, limit)
	}
	return append([]completion(nil), o.outs...), nil
}

func (o *outcomes) close() {
	for _, s := range o.subs {
		_ = s.Unsubscribe()
	}
}

// requestExtractions publishes two requests per session, back to back: the
// first (whole transcript) costs one model call; the second names an older
// point (a request delayed in flight), must be answered as already covered
// and never run beside the first or move the coverage back. (Identical
// requests would be deduplicated by the stream.)
func requestExtractions(ctx context.Context, e *env, sessions []string, seqs map[string][]uint64) error {
	for round := 0; round < 2; round++ {
		for _, s := range sessions {
			l := seqs[s]
			upTo := l[len(l)-1-round]
			req := events.ExtractionRequested{Tenant: benchTenant, Session: s, UpToSeq: upTo,
				UpToID: fmt.Sprintf("%s-m%06d", s, indexOf(l, upTo)), Reason: events.ReasonThreshold}
			if err := publishRequest(ctx, e.js, req); err != nil {
				return err
			}
		}
	}
	return nil
}

// judgeOutcomes counts the model-calling extractions into step and returns
// when the last one completed and the ordering problems: failed outcomes,
// coverage moving back, sessions not covered to their end.
func judgeOutcomes(step *ExtractionStep, outs []completion, sessions []string, seqs map[string][]uint64) (last time.Time, problems []string) {
	covered := map[string]uint64{}
	for _, c := range outs {
		if c.failed != "" {
			problems = append(problems, fmt.Sprintf("session %s: extraction up to %d failed: %s", c.session, c.upTo, c.failed))
			continue
		}
		if c.covered < covered[c.session] {
			problems = append(problems, fmt.Sprintf("session %s: coverage went back from %d to %d", c.session, covered[c.session], c.covered))
		}
		covered[c.session] = max(covered[c.session], c.covered)
		if !c.skipped {
			step.Extractions++
			last = c.at
		}
	}
	for _, s := range sessions {
		if l := seqs[s]; covered[s] < l[len(l)-1] {
			problems = append(problems, fmt.Sprintf("session %s: covered %d, want %d", s, covered[s], l[len(l)-1]))
		}
	}
	sort.Strings(problems)
	step.OrderingProblems = len(problems)
	return last, problems
}

// busiestWorker returns how many of sessions the busiest of n workers owns:
// sessions map to partitions as RECALL_EXTRACT's subject transform maps
// them (FNV-1a of tenant and session tokens, modulo the partition count),
// partitions to workers as the extractors' consumer group does.
func busiestWorker(sessions []string, n, partitions int) int {
	load := map[string]int{}
	busiest := 0
	for _, w := range sessionOwners(sessions, n, partitions) {
		load[w]++
		busiest = max(busiest, load[w])
	}
	return busiest
}

// sessionOwners maps each session to the bench worker (of n) that owns its
// partition: the server's partition() is FNV-1a of tenant and session, the
// assignment pcgroup.Assign over the worker ids.
func sessionOwners(sessions []string, n, partitions int) map[string]string {
	members := make([]string, n)
	for w := range members {
		members[w] = fmt.Sprintf("bench-%d-%d", n, w)
	}
	ownerOf := make([]string, partitions)
	for w, ps := range pcgroup.Assign(members, partitions) {
		for _, p := range ps {
			ownerOf[p] = w
		}
	}
	out := make(map[string]string, len(sessions))
	for _, s := range sessions {
		h := fnv.New32a()
		h.Write([]byte(benchTenant + s))
		out[s] = ownerOf[h.Sum32()%uint32(partitions)]
	}
	return out
}

// countShared counts the extractions a worker ran for a session of another
// worker's partition (work sharing).
func countShared(outs []completion, owners map[string]string) int {
	n := 0
	for _, c := range outs {
		if c.failed == "" && !c.skipped && c.worker != owners[c.session] {
			n++
		}
	}
	return n
}

func indexOf(l []uint64, v uint64) int {
	for i, x := range l {
		if x == v {
			return i
		}
	}
	return -1
}

// publishRequest publishes an extraction request as the trigger does: a
// binary-mode CloudEvent on recall.extract.<tenant>.<session>, deduplicated
// by RequestDedupID.
func publishRequest(ctx context.Context, js jetstream.JetStream, req events.ExtractionRequested) error {
	data, _ := json.Marshal(req)
	ev := eventOf(events.TypeExtractionRequested, req.RequestDedupID(), req.Session, data)
	m := natsce.NewMsg(events.ExtractSubject(req.Tenant, req.Session), &ev)
	m.Header[jetstream.MsgIDHeader] = []string{req.RequestDedupID()}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publishing an extraction request: %w", err)
	}
	return nil
}

// waitWorkers waits until the membership bucket lists n workers and every
// partition consumer has a pull request waiting (an owner is pulling).
func waitWorkers(ctx context.Context, e *env, n int, svcs []*service) error {
	kv, err := e.js.KeyValue(ctx, events.BucketWorkers)
	if err != nil {
		return err
	}
	parts := e.provisionConfig().Partitions
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range svcs {
			select {
			case <-s.done:
				if s.err != nil && strings.Contains(s.err.Error(), "not implemented") {
					return skipped("the extractor service does not run: " + s.err.Error())
				}
				return fmt.Errorf("an extractor stopped: %v", s.err)
			default:
			}
		}
		keys, _ := kv.Keys(ctx)
		ready := len(keys) == n
		for p := 0; ready && p < parts; p++ {
			c, err := e.js.Consumer(ctx, events.StreamExtract, events.ExtractDurable(p))
			ready = err == nil && c.CachedInfo().NumWaiting > 0
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%d extractors did not own every partition within 60s", n)
}
