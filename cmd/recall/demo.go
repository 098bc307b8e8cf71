package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/demo"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/stack"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

const (
	demoTenant  = "demo"
	demoSession = "demo-tally"
)

// demoResult is the --json output.
type demoResult struct {
	Tenant      string               `json:"tenant"`
	Session     string               `json:"session"`
	Transcript  demoTranscript       `json:"transcript"`
	Extractions []demoExtraction     `json:"extractions"`
	Memory      string               `json:"memory"`
	MemoryInfo  demoMemory           `json:"memory_record"`
	Compaction  demoCompaction       `json:"compaction"`
	Reply       *events.CompactReply `json:"reply,omitempty"`
	Provider    string               `json:"provider,omitempty"`
	Elapsed     float64              `json:"elapsed_seconds"`
}

type demoTranscript struct {
	Name   string         `json:"name"`
	Events int            `json:"events"`
	Tokens int64          `json:"tokens"`
	Counts map[string]int `json:"counts"`
}

type demoExtraction struct {
	UpToSeq    uint64            `json:"up_to_seq"`
	Revision   uint64            `json:"revision"`
	DurationMS int64             `json:"duration_ms"`
	Usage      events.TokenUsage `json:"usage"`
	Provider   string            `json:"provider,omitempty"`
	Failed     string            `json:"failed,omitempty"`
}

type demoMemory struct {
	Revision          uint64 `json:"revision"`
	LastSummarizedID  string `json:"last_summarized_id,omitempty"`
	LastSummarizedSeq uint64 `json:"last_summarized_seq,omitempty"`
	CoveredSeq        uint64 `json:"covered_seq"`
	Extractions       int    `json:"extractions"`
	Tokens            int64  `json:"tokens"`
}

type demoCompaction struct {
	Outcome      string  `json:"outcome"`
	Served       bool    `json:"served"`
	Reason       string  `json:"reason,omitempty"`
	KeptMessages int     `json:"kept_messages"`
	FirstKeptSeq uint64  `json:"first_kept_seq,omitempty"`
	LastSeq      uint64  `json:"last_seq,omitempty"`
	TokensBefore int64   `json:"tokens_before"`
	TokensAfter  int64   `json:"tokens_after"`
	Threshold    int64   `json:"threshold"`
	Truncated    bool    `json:"truncated"`
	WaitedMS     int64   `json:"waited_ms"`
	LatencyMS    float64 `json:"latency_ms"`
	CompactorMS  float64 `json:"compactor_ms"`
}

func runDemo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("demo")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	full := fs.Bool("full", false, "with --json: include the whole compaction reply (kept messages as CloudEvents)")
	timeout := fs.Duration("timeout", 50*time.Second, "give up when the pipeline has not produced the memory by then")
	verbose := fs.Bool("verbose", false, "print the services' logs on stderr")
	keepMin := fs.Int64("keep-min-tokens", 3000, "keep window minimum for the compaction (the service default is 10,000; this session's messages hold only ~7,600 tokens, so the default would keep all of them)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	started := time.Now()
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "▸ "+format+"\n", a...) }
	dir, err := os.MkdirTemp("", "recall-demo-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, nc, err := startDemoStack(ctx, dir, *verbose, say)
	if err != nil {
		return err
	}
	defer st.Close()
	defer nc.Close()
	js, _ := jetstream.New(nc)

	out, mrec, err := replayDemo(ctx, nc, js, say, started.Add(*timeout))
	if err != nil {
		return err
	}
	say("compacting the session from its memory (recall.api.compact.%s.%s, keep window ≥ %s tokens and 5 text messages)…", demoTenant, demoSession, thousands(*keepMin))
	reply, latency, err := requestCompaction(ctx, nc, demoTenant, demoSession, events.CompactRequest{Trigger: events.TriggerManual, MinTokens: *keepMin})
	if err != nil {
		return err
	}
	out.Compaction = demoCompaction{Outcome: reply.Outcome, Served: reply.Served, Reason: reply.Reason, KeptMessages: reply.KeptCount,
		FirstKeptSeq: reply.FirstKeptSeq, LastSeq: reply.LastSeq, TokensBefore: reply.TokensBefore, TokensAfter: reply.TokensAfter,
		Threshold: reply.Threshold, Truncated: reply.Truncated, WaitedMS: reply.WaitedMS,
		LatencyMS: float64(latency.Microseconds()) / 1000, CompactorMS: float64(reply.DurationUS) / 1000}
	if *full {
		out.Reply = reply
	}
	out.Elapsed = time.Since(started).Seconds()
	say("done in %s", fmtDuration(time.Since(started)))
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printDemo(stdout, out, mrec, reply, latency)
	return nil
}

// startDemoStack starts the embedded server and the six services with
// their data in dir, and connects to it as an operator.
func startDemoStack(ctx context.Context, dir string, verbose bool, say func(string, ...any)) (*stack.Stack, *nats.Conn, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if verbose {
		var tc telemetry.Config
		_ = envconfig.Process(svcmain.EnvPrefix, &tc)
		log = telemetry.NewLogger(os.Stderr, tc)
	}
	say("starting an embedded NATS server and the six services (ingest, trigger, extractor, compactor, indexer, longterm)…")
	t0 := time.Now()
	st, err := stack.Start(ctx, stack.Options{DataDir: dir, Log: log})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the stack: %w", err)
	}
	say("  up in %s — NATS at %s, data in %s", fmtDuration(time.Since(t0)), st.NATSURL, dir)
	nc, err := nats.Connect(st.NATSURL, append(st.AdminOptions(), nats.Name("recall-demo"))...)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("connecting to the embedded NATS: %w", err)
	}
	return st, nc, nil
}

// replayDemo publishes the demo transcript, waits (until deadline) for the
// pipeline to settle, and returns the result so far and the memory record.
func replayDemo(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, say func(string, ...any), deadline time.Time) (demoResult, *events.MemoryRecord, error) {
	res, err := demo.Import(demoTenant, demoSession)
	if err != nil {
		return demoResult{}, nil, err
	}
	var tokens int64
	for _, e := range res.Events {
		var m events.Message
		if e.Type() == events.TypeMessage && json.Unmarshal(e.Data(), &m) == nil {
			tokens += memory.EstimateMessage(&m)
		}
	}
	out := demoResult{Tenant: demoTenant, Session: demoSession, Transcript: demoTranscript{Name: demo.Name, Events: len(res.Events), Tokens: tokens, Counts: res.Counts}}
	// Follow the lifecycle notifications for progress and completion.
	w := &demoWatch{changed: make(chan struct{}, 1), say: say}
	sub, err := nc.Subscribe(events.SubjectEventsRoot+".*."+demoTenant+"."+demoSession, w.handle)
	if err != nil {
		return out, nil, fmt.Errorf("subscribing to lifecycle events: %w", err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()

	say("replaying %q: %d events (%s tool calls, ~%s tokens of messages)…", demo.Name, len(res.Events), thousands(int64(res.Counts["tool_use"])), thousands(tokens))
	cl, err := client.New(js, demoTenant)
	if err != nil {
		return out, nil, err
	}
	t0 := time.Now()
	if _, err := cl.PublishBatch(ctx, res.Events); err != nil {
		return out, nil, fmt.Errorf("publishing the demo transcript: %w", err)
	}
	published := time.Now()
	layout, _ := cl.Layout(ctx) // known: the batch was published
	say("  stored in %s in %s; the trigger watches the session…", layout.Stream(demoTenant, demoSession), fmtDuration(published.Sub(t0)))
	var tc triggersvc.Config
	_ = envconfig.Process(svcmain.EnvPrefix, &tc)
	quiet := tc.WithDefaults().ResponseQuietPeriod
	if err := w.waitSettled(ctx, published.Add(quiet+1500*time.Millisecond), deadline, tokens); err != nil {
		return out, nil, err
	}
	out.Extractions = w.extractions()
	mrec, err := readDemoMemory(ctx, js, &out)
	return out, mrec, err
}

// readDemoMemory reads the demo session's memory record into out.
func readDemoMemory(ctx context.Context, js jetstream.JetStream, out *demoResult) (*events.MemoryRecord, error) {
	kv, err := js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketMemory, err)
	}
	mrec, rev, err := store.NewMemory(kv).Get(ctx, demoTenant, demoSession)
	if err != nil {
		return nil, err
	}
	out.Memory = mrec.Notes
	out.Provider = strings.Trim(mrec.Provider+"/"+mrec.Model, "/")
	out.MemoryInfo = demoMemory{Revision: rev, LastSummarizedID: mrec.LastSummarizedID, LastSummarizedSeq: mrec.LastSummarizedSeq,
		CoveredSeq: mrec.CoveredSeq, Extractions: mrec.Extractions, Tokens: memory.DocumentTokens(mrec.Notes)}
	return &mrec, nil
}

// printDemo writes the demo's outcome for a reader: the memory, then the
// compaction.
func printDemo(stdout io.Writer, out demoResult, mrec *events.MemoryRecord, reply *events.CompactReply, latency time.Duration) {
	fmt.Fprintf(stdout, "Session memory of %s/%s (revision %d, %d extraction(s), %s, ~%s tokens):\n\n",
		demoTenant, demoSession, out.MemoryInfo.Revision, mrec.Extractions, orText(out.Provider, "offline provider"), thousands(out.MemoryInfo.Tokens))
	fmt.Fprintln(stdout, indent(strings.TrimRight(mrec.Notes, "\n"), "  "))
	fmt.Fprintln(stdout)
	printCompaction(stdout, demoTenant, demoSession, reply, latency, false)
	fmt.Fprintf(stdout, "\nThe platform's new context: the boundary marker, the summary message (the notes above), then the %d kept messages verbatim.\n", reply.KeptCount)
	fmt.Fprintln(stdout, "Try: go run ./cmd/recall demo --json | jq .compaction")
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// demoWatch follows the session's lifecycle notifications.
type demoWatch struct {
	mu        sync.Mutex
	requested int
	done      []demoExtraction
	lastEvent time.Time
	changed   chan struct{}
	say       func(string, ...any)
}

func (w *demoWatch) handle(m *nats.Msg) {
	e, err := natsce.FromMsg(m)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer func() {
		w.lastEvent = time.Now()
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}()
	switch e.Type() {
	case events.TypeExtractionRequested:
		var r events.ExtractionRequested
		_ = json.Unmarshal(e.Data(), &r)
		w.requested++
		w.say("trigger: extraction requested up to seq %d (%s: context %s tokens, %d tool calls since the last one)",
			r.UpToSeq, r.Reason, thousands(r.Counters.Tokens), r.Counters.ToolCallsSince)
	case events.TypeExtractionCompleted:
		var c events.ExtractionCompleted
		_ = json.Unmarshal(e.Data(), &c)
		w.done = append(w.done, demoExtraction{UpToSeq: c.UpToSeq, Revision: c.Revision, DurationMS: c.DurationMS, Usage: c.Usage, Provider: c.Provider})
		skipped := ""
		if c.Skipped {
			skipped = ", already covered: no LLM call"
		}
		w.say("extractor: memory revision %d committed up to seq %d (%s, %d ms, %s in / %s out tokens%s)",
			c.Revision, c.CoveredSeq, orText(c.Provider, "provider"), c.DurationMS, thousands(c.Usage.InputTokens), thousands(c.Usage.OutputTokens), skipped)
	case events.TypeExtractionFailed:
		var f events.ExtractionFailed
		_ = json.Unmarshal(e.Data(), &f)
		w.done = append(w.done, demoExtraction{UpToSeq: f.UpToSeq, Failed: f.Error})
		w.say("extractor: extraction up to seq %d failed: %s", f.UpToSeq, f.Error)
	}
}

func (w *demoWatch) extractions() []demoExtraction {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]demoExtraction(nil), w.done...)
}

// waitSettled waits until at least one extraction completed, every
// requested one finished, and the trigger had time to decide on the last
// response (notBefore); it fails at deadline with what is missing.
func (w *demoWatch) waitSettled(ctx context.Context, notBefore, deadline time.Time, tokens int64) error {
	for {
		w.mu.Lock()
		requested, finished := w.requested, len(w.done)
		completed := 0
		for _, d := range w.done {
			if d.Failed == "" {
				completed++
			}
		}
		last := w.lastEvent
		w.mu.Unlock()
		now := time.Now()
		if completed > 0 && finished >= requested && now.After(notBefore) && now.Sub(last) > 500*time.Millisecond {
			return nil
		}
		if now.After(deadline) {
			switch {
			case requested == 0:
				return fmt.Errorf("the trigger requested no extraction in time (the transcript holds ~%s tokens; the first extraction needs 10,000 — RECALL_MIN_TOKENS_TO_INIT)", thousands(tokens))
			case completed == 0:
				return errors.New("the extractor completed no extraction in time (run with --verbose; check RECALL_LLM_* if a provider key is set)")
			default:
				return fmt.Errorf("%d of %d requested extractions did not finish in time", requested-finished, requested)
			}
		}
		wait := min(time.Until(deadline), 250*time.Millisecond)
		if d := time.Until(notBefore); d > 0 && completed > 0 && finished >= requested {
			wait = min(wait, d)
		}
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.changed:
		case <-t.C:
		}
		t.Stop()
	}
}
