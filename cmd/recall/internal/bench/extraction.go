package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/pkg/memory"
)

const (
	// extractMessages is how many records each session gains between two
	// of its extractions.
	extractMessages = 8
	// extractRounds is how many model-calling extractions each session
	// gets, one after the other: each round's request is published when the
	// session's previous one settled, as a trigger would publish it for a
	// session that kept growing meanwhile. With two rounds the 8-worker
	// step of a full run lasts eight model latencies per slot (waves:
	// 1024 × 2 / (8 × 32)), so its ramp-up and last wave weigh less.
	extractRounds = 2
	// scalingLatency is the fake model's latency in the scaling steps of a
	// full run, a real model's: at 200 ms the 8-worker step measured the
	// CPU, not the scheduling.
	scalingLatency = 2 * time.Second
	// scalingPerWorker is each worker's concurrency in the scaling steps of
	// a full run. At capacity 8 workers run 256 extractions at once, a
	// quarter of the 1,024 sessions (the busiest worker owns about 130 for
	// its 32 slots), and at about 5 ms of CPU per extraction (the embedded
	// server's included) keep about 0.6 of a core busy, so a 2-core machine
	// is not the bound; the four steps take about four minutes.
	scalingPerWorker = 32
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

func (f *fakeModel) provider() llm.Provider {
	return llm.NewAnthropic(llm.ClientOptions{APIKey: "bench", BaseURL: f.srv.BaseURL(), Model: "bench-model"})
}

// overlapsSeen describes the overlapping model calls seen so far.
func (f *fakeModel) overlapsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.overlaps...)
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

// runExtraction runs the scaling steps (planExtraction), then the long
// session.
func runExtraction(ctx context.Context, e *env) error {
	p := planExtraction(e.sizes, e.opts.Quick)
	r := &e.res.Extraction
	r.LLMLatencyMS = int(p.latency / time.Millisecond)
	r.Sessions, r.PerWorker, r.Rounds = p.sessions, p.perWorker, p.rounds
	examples, err := runScaling(ctx, e, p)
	if err != nil {
		return err
	}
	// The long session measures Recall's time besides the model, so it
	// keeps sizesFor's latency: its first extraction makes about a hundred
	// model calls one after the other.
	fake := newFakeModel(e.sizes.extractLatency)
	defer fake.close()
	long, err := runLongSession(ctx, e, fake.provider())
	if err != nil {
		return fmt.Errorf("long session: %w", err)
	}
	r.LongSession = long
	for _, s := range long {
		e.progress("   long session, extraction up to record %d: read from seq %d, %d model calls, %.0f ms besides the model", s.Records, s.ReadFrom, s.Parts, s.OverheadMS)
	}
	overlaps := fake.overlapsSeen()
	*r.OrderingViolations += len(overlaps)
	examples = append(examples, overlaps...)
	if len(examples) > 5 {
		examples = examples[:5]
	}
	r.ViolationExamples = examples
	return nil
}

// runScaling runs the scaling steps, one per worker count, each against a
// fresh fake model (the fake keeps every request body), and fills in
// e.res.Extraction's scaling, CPU and violations; it returns examples of
// the violations.
func runScaling(ctx context.Context, e *env, p extractionPlan) ([]string, error) {
	r := &e.res.Extraction
	total := 0
	var examples []string
	for i, workers := range p.workers {
		if i > 0 {
			if err := e.reset(ctx); err != nil {
				return nil, err
			}
		}
		fake := newFakeModel(p.latency)
		step, ex, err := extractionStep(ctx, e, p, fake.provider(), workers)
		fake.close()
		if err != nil {
			return nil, fmt.Errorf("%d workers: %w", workers, err)
		}
		overlaps := fake.overlapsSeen()
		step.OrderingProblems += len(overlaps)
		r.Scaling = append(r.Scaling, step)
		total += step.OrderingProblems
		examples = append(examples, ex...)
		examples = append(examples, overlaps...)
	}
	r.OrderingViolations = ptrInt(total)
	base := r.Scaling[0].ExtractionsPerS / float64(r.Scaling[0].Workers)
	for i := range r.Scaling {
		s := &r.Scaling[i]
		s.Efficiency = round3(s.ExtractionsPerS / (float64(s.Workers) * base))
		e.progress("   %d workers: %.1f extractions/s (%.0f%% of their capacity %.0f/s), efficiency %.3f (without sharing the session balance bounds it to %.3f: busiest worker owns %d of %d sessions; %d extractions shared); besides the model p50 %.0f ms, p99 %.0f ms; %s",
			s.Workers, s.ExtractionsPerS, 100*s.Utilization, s.CapacityPerS, s.Efficiency, s.EfficiencyBound, s.BusiestWorkerSessions, r.Sessions, s.Shared, s.OverheadP50MS, s.OverheadP99MS, cpuNote(*s))
	}
	r.CPUMSPerExtraction = overallCPU(r.Scaling)
	return examples, nil
}

// extractionPlan is the load of the scaling steps.
type extractionPlan struct {
	latency   time.Duration // the fake model's
	sessions  int
	perWorker int // extractions one worker runs at once
	rounds    int // model-calling extractions per session, one after the other
	workers   []int
}

// planExtraction is the scaling steps' load: sizesFor's, with a real
// model's latency and a concurrency to match in a full run.
func planExtraction(s sizes, quick bool) extractionPlan {
	p := extractionPlan{latency: s.extractLatency, sessions: s.extractSessions, perWorker: s.extractPerWorker,
		rounds: extractRounds, workers: s.extractWorkers}
	if !quick {
		p.latency = max(p.latency, scalingLatency)
		p.perWorker = max(p.perWorker, scalingPerWorker)
	}
	return p
}
