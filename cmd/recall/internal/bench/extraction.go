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
	// extractRounds is how many model-calling extractions each session of
	// a full run gets, one after the other: a session's next request is
	// published when its previous one settled, as a trigger publishes them
	// for a session that kept growing. One is enough: at scalingPerWorker
	// the 8-worker step makes about six waves (model latencies per slot),
	// and each more round adds about three minutes to the four steps. A
	// quick run asks for two, so that the smoke test checks successive
	// extractions of a session.
	extractRounds = 1
	// scalingLatency is the fake model's latency in the scaling steps of a
	// full run, a real model's: at 200 ms the 8-worker step measured the
	// CPU, not the scheduling.
	scalingLatency = 2 * time.Second
	// scalingPerWorker is each worker's concurrency in the scaling steps of
	// a full run. 8 workers run 176 extractions at once, and 1,024 sessions
	// make 5.8 such waves (46.5 at one worker): the last wave's free slots
	// take the few percent of sessions by which the workers' partitions
	// differ (the busiest worker owns 130, not 128) once work sharing has
	// moved them. At a power of two (16 or 32) the 8-worker step is exactly
	// eight waves with no slack: one extraction left over on one worker
	// costs a ninth wave, and the efficiency is 8/9 = 0.889 whatever the
	// scheduling. At about 4 ms of CPU per extraction the steps keep well
	// under a core busy; the four take about three minutes.
	scalingPerWorker = 22
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

// planExtraction is the scaling steps' load: sizesFor's sessions and
// worker counts; in a full run a real model's latency and
// scalingPerWorker, in a quick one sizesFor's latency and concurrency and
// two rounds.
func planExtraction(s sizes, quick bool) extractionPlan {
	p := extractionPlan{latency: max(s.extractLatency, scalingLatency), sessions: s.extractSessions,
		perWorker: scalingPerWorker, rounds: extractRounds, workers: s.extractWorkers}
	if quick {
		p.latency, p.perWorker, p.rounds = s.extractLatency, s.extractPerWorker, 2
	}
	return p
}
