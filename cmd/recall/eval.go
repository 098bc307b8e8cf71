package main

import (
	"context"
	"encoding/json"
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

	"github.com/recallhq/recall/internal/eval"
	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/services/longterm/ltmeval"
	"github.com/recallhq/recall/services/stack"
)

func runEval(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("eval")
	sessions := fs.Int("sessions", 0, fmt.Sprintf("generated sessions (default %d; --quick: 2)", eval.DefaultSessions))
	seed := fs.Uint64("seed", 1, "seed of the generated sessions (same seed, same sessions)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object instead of the tables")
	quick := fs.Bool("quick", false, "two sessions per family (50k and 200k tokens, one earlier compaction): the CI smoke run")
	budget := fs.Int64("budget", eval.DefaultBudget, "context budget in tokens of the truncation baseline (and Recall's bound)")
	useModel := fs.Bool("model", true, "with a provider configured (RECALL_LLM_*, API key): also run Recall with that model")
	useJudge := fs.Bool("judge", true, "with a provider configured: grade every context with it as an LLM judge too")
	quiet := fs.Bool("quiet", false, "no progress bar on stderr")
	verbose := fs.Bool("verbose", false, "print the services' logs on stderr")
	family := fs.String("family", "all", "session family: unseen (the headline, written blind to the offline rules), blind2 (also written blind, with probes), blind3 (what issue 45 found lost), holdout, planted, or all (in that order)")
	dump := fs.String("dump", "", "write every context as text to this directory (<session>.<system>.txt; with --ltm the memory at each checkpoint, <user>.<sessions>.txt)")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after this long")
	ltm := fs.Bool("ltm", false, "measure long-term memory hygiene instead: many sessions of three users through the long-term memory service (offline provider); --json prints {\"ltm\": …}")
	ltmSessions := fs.Int("ltm-sessions", 0, fmt.Sprintf("with --ltm: sessions a user (default %d; --quick: %d)", ltmeval.DefaultSessions, quickLTMSessions))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	families, err := evalFamilies(*family)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		var tc telemetry.Config
		_ = envconfig.Process(svcmain.EnvPrefix, &tc)
		log = telemetry.NewLogger(os.Stderr, tc)
	}
	if *ltm {
		return runEvalLTM(ctx, ltmArgs{sessions: *ltmSessions, dump: *dump, quick: *quick, asJSON: *asJSON, quiet: *quiet, log: log}, stdout)
	}
	if *ltmSessions != 0 {
		return fmt.Errorf("--ltm-sessions needs --ltm")
	}
	o := eval.Options{Seed: *seed, Sessions: *sessions, Quick: *quick, Budget: *budget, Tenant: eval.DefaultTenant,
		Recall: &stackCompactor{provider: llm.NewOffline(), tenant: eval.DefaultTenant, log: log}}
	if !*quiet {
		o.Progress = os.Stderr
	}
	if *dump != "" {
		if err := os.MkdirAll(*dump, 0o755); err != nil {
			return err
		}
		o.DumpDir = *dump
	}
	if err := configureModel(&o, log, *useModel, *useJudge); err != nil {
		return err
	}
	rep, err := eval.RunFamilies(ctx, o, families)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing JSON: %w", err)
		}
		return nil
	}
	return eval.PrintTable(stdout, rep)
}

// configureModel adds the configured provider, when it is not the offline
// one, as Recall's model (useModel) and as the judge (useJudge).
func configureModel(o *eval.Options, log *slog.Logger, useModel, useJudge bool) error {
	var lc llm.Config
	if err := envconfig.Process(svcmain.EnvPrefix, &lc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	configured, err := llm.New(lc, log)
	if err != nil {
		return err
	}
	if configured.Name() == llm.KindOffline {
		return nil
	}
	if useModel {
		o.RecallModel = &stackCompactor{provider: configured, tenant: eval.DefaultTenant, log: log}
		o.ModelName = configured.Name() + "/" + configured.Model()
	}
	if useJudge {
		o.Judge = &eval.Judge{Provider: configured}
	}
	return nil
}

// evalFamilies is the list --family names.
func evalFamilies(name string) ([]string, error) {
	if name == "all" {
		return sessiongen.Families, nil
	}
	for _, f := range sessiongen.Families {
		if f == name {
			return []string{f}, nil
		}
	}
	return nil, fmt.Errorf("--family %q: want all, %s", name, strings.Join(sessiongen.Families, " or "))
}

// stackCompactor runs the sessions through a whole Recall — embedded NATS,
// ingest, trigger, extractor, compactor, the stack of recall up and demo —
// with provider as the extractor's model.
type stackCompactor struct {
	provider llm.Provider
	tenant   string
	log      *slog.Logger
}

// Compact replays every session, waits until the trigger has read every
// record and every extraction it asked for has finished, then asks for
// each session's compaction (trigger auto, default keep window and
// threshold).
func (s *stackCompactor) Compact(ctx context.Context, sessions []*eval.Prepared, step func(string)) (map[string]*eval.Context, error) {
	dir, err := os.MkdirTemp("", "recall-eval-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := stack.Start(ctx, stack.Options{DataDir: dir, Log: s.log, Provider: s.provider})
	if err != nil {
		return nil, fmt.Errorf("starting the stack: %w", err)
	}
	defer st.Close()
	nc, err := nats.Connect(st.NATSURL, nats.Name("recall-eval"))
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded NATS: %w", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	w := &evalWatch{changed: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(events.SubjectEventsRoot+".*."+s.tenant+".*", w.handle)
	if err != nil {
		return nil, fmt.Errorf("subscribing to lifecycle events: %w", err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()

	cl, err := client.New(js, s.tenant)
	if err != nil {
		return nil, err
	}
	for _, p := range sessions {
		for i := 0; i < len(p.Events); i += 500 {
			if _, err := cl.PublishBatch(ctx, p.Events[i:min(i+500, len(p.Events))]); err != nil {
				return nil, fmt.Errorf("publishing %s: %w", p.ID, err)
			}
		}
		step("replayed " + p.ID)
	}
	if err := s.settle(ctx, js, w, st); err != nil {
		return nil, err
	}
	if n := w.failures(); n > 0 {
		step(fmt.Sprintf("%d extraction(s) failed", n))
	}
	out := map[string]*eval.Context{}
	for _, p := range sessions {
		reply, _, err := requestCompaction(ctx, nc, s.tenant, p.ID, events.CompactRequest{Trigger: events.TriggerAuto})
		if err != nil {
			return nil, err
		}
		c, err := eval.FromReply(reply)
		if err != nil {
			return nil, err
		}
		out[p.ID] = c
		step("compacted " + p.ID)
	}
	return out, nil
}

// settle waits until the trigger has acknowledged every transcript record
// (in every shard stream) and every extraction it requested has completed
// or failed, with no lifecycle event for a second.
func (s *stackCompactor) settle(ctx context.Context, js jetstream.JetStream, w *evalWatch, st *stack.Stack) error {
	last, err := shardHeads(ctx, js)
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		consumed := triggerConsumed(ctx, js, last)
		requested, finished, lastEvent := w.state()
		if lastEvent.Before(start) {
			lastEvent = start
		}
		if consumed && finished >= requested && time.Since(lastEvent) > time.Second {
			return nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the pipeline (%d of %d extractions finished): %w", finished, requested, ctx.Err())
		case <-st.Done():
			t.Stop()
			return fmt.Errorf("the stack stopped: %w", st.Err())
		case <-w.changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// shardHeads returns the last sequence of every transcript shard stream
// (the layout read from the server).
func shardHeads(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		return nil, err
	}
	last := make(map[string]uint64, layout.Shards())
	for _, name := range layout.Streams() {
		ts, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		last[name] = ts.CachedInfo().State.LastSeq
	}
	return last, nil
}

// triggerConsumed reports whether the trigger's consumer on every shard
// stream has acknowledged its records up to last[stream] (a shard with no
// record is not asked).
func triggerConsumed(ctx context.Context, js jetstream.JetStream, last map[string]uint64) bool {
	for name, seq := range last {
		if seq == 0 {
			continue
		}
		c, err := js.Consumer(ctx, name, events.DurableTrigger)
		if err != nil || c.CachedInfo().AckFloor.Stream < seq {
			return false
		}
	}
	return true
}

// evalWatch counts the extractions requested and finished across sessions.
type evalWatch struct {
	mu                          sync.Mutex
	requested, finished, failed int
	last                        time.Time
	changed                     chan struct{}
}

func (w *evalWatch) handle(m *nats.Msg) {
	e, err := natsce.FromMsg(m)
	if err != nil {
		return
	}
	w.mu.Lock()
	switch e.Type() {
	case events.TypeExtractionRequested:
		w.requested++
	case events.TypeExtractionCompleted:
		w.finished++
	case events.TypeExtractionFailed:
		w.finished++
		w.failed++
	}
	w.last = time.Now()
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *evalWatch) state() (requested, finished int, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requested, w.finished, w.last
}

func (w *evalWatch) failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}
