// Package bench is `recall bench`: Recall's throughput and latency measured
// against the raw NATS ceilings of the same server in the same run.
//
// Absolute numbers on a shared machine are noise; ratios measured side by
// side are not. Every scenario therefore reports its number next to the raw
// JetStream or core NATS operation it is bounded by (async publish, pull
// consume, request-reply, KV get), measured with messages of the same sizes.
//
// Scenarios run one after another on one server. Before each, the harness
// deletes Recall's streams and buckets and provisions them again, so a
// scenario never sees another's data. Against an external server (Options.URL)
// this destroys Recall data: Run refuses when the transcript's streams hold
// messages, unless Options.Force is set. The bench provisions the transcript
// in benchShards shards.
//
// Where the component a scenario measures is not available (a service that
// does not run yet), the scenario reports null numbers and a skip reason;
// it never reports a number it did not measure.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// Scenario names, in run order.
const (
	ScenarioRaw        = "raw"
	ScenarioIngest     = "ingest"
	ScenarioTrigger    = "trigger"
	ScenarioCompaction = "compaction"
	ScenarioExtraction = "extraction"
	ScenarioPipeline   = "pipeline"
	ScenarioQuery      = "query"
)

// Scenarios lists every scenario in run order.
var Scenarios = []string{ScenarioRaw, ScenarioIngest, ScenarioTrigger, ScenarioCompaction, ScenarioExtraction, ScenarioPipeline, ScenarioQuery, ScenarioGateway}

// ErrUnknownScenario is returned by Run for a name not in Scenarios.
var ErrUnknownScenario = errors.New("unknown scenario")

// ErrServerHasData is returned by Run when the external server already holds
// Recall transcripts and Force is not set.
var ErrServerHasData = errors.New("the NATS server holds Recall data that the benchmark would delete")

// Options configures a run.
type Options struct {
	// Quick runs every scenario at small sizes (CI smoke, well under 60 s).
	Quick bool
	// Huge adds a 1,000,000-record transcript to the compaction scenario.
	Huge bool
	// URL is an external NATS server; empty starts an embedded server with
	// file storage in a temporary directory.
	URL string
	// Force allows running against an external server whose Recall streams
	// hold data (they are deleted).
	Force bool
	// Only restricts the run to these scenarios (nil: all). Scenarios that
	// need raw baselines for their ratios run the raw scenario's parts they
	// need regardless.
	Only []string
	// Progress receives one line per step; nil discards.
	Progress io.Writer
	// Log receives the services' logs; nil discards.
	Log *slog.Logger
	// ProfileDir, when set, receives a CPU profile of each scenario
	// (<scenario>.cpu.pprof) covering the whole process: the bench client,
	// the services and the embedded server.
	ProfileDir string
}

// env is what every scenario runs against.
type env struct {
	opts  Options
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	log   *slog.Logger
	sizes sizes
	res   *Result
}

// sizes are the scenario sizes of a quick or full run.
type sizes struct {
	rawMessages       int
	latencySamples    int
	ingestEvents      int
	ingestSessions    int
	triggerSessions   int
	triggerPerSession int
	compactSessions   int
	compactSizes      []int
	compactRequests   int
	// compactConcurrency are the concurrent-compaction steps (the first
	// within the compactor's per-tenant share of 64, the second over it);
	// compactConcRequests the compactions of each.
	compactConcurrency  []int
	compactConcRequests int
	extractSessions     int
	extractWorkers      []int
	// extractLatency and extractPerWorker are the fake model's latency and
	// a worker's concurrency of the long session and of a quick run's
	// scaling steps; a full run's scaling steps use a real model's latency
	// and more at once (planExtraction).
	extractLatency   time.Duration
	extractPerWorker int
	// longSessionRecords is the size of the session extracted three times.
	longSessionRecords int
	pipelineDuration   time.Duration
	pipelineSessions   int
	// querySessionMessages is the size of the session asked questions.
	querySessionMessages int
	queryRequests        int
}

func sizesFor(quick bool) sizes {
	if quick {
		return sizes{
			rawMessages: 5000, latencySamples: 1000,
			ingestEvents: 5000, ingestSessions: 100,
			triggerSessions: 2000, triggerPerSession: 4,
			compactSessions: 200, compactSizes: []int{100, 1000, 3000}, compactRequests: 30,
			compactConcurrency: []int{16, 96}, compactConcRequests: 400,
			extractSessions: 64, extractWorkers: []int{1, 2, 4, 8}, extractLatency: 50 * time.Millisecond, extractPerWorker: 4,
			longSessionRecords: 4000,
			pipelineDuration:   3 * time.Second, pipelineSessions: 50,
			querySessionMessages: 1000, queryRequests: 20,
		}
	}
	return sizes{
		rawMessages: 100000, latencySamples: 20000,
		ingestEvents: 100000, ingestSessions: 1000,
		triggerSessions: 100000, triggerPerSession: 4,
		compactSessions: 10000, compactSizes: []int{1000, 10000, 100000}, compactRequests: 300,
		compactConcurrency: []int{64, 256}, compactConcRequests: 10000,
		extractSessions: 1024, extractWorkers: []int{1, 2, 4, 8}, extractLatency: 200 * time.Millisecond, extractPerWorker: 16,
		longSessionRecords: 40000,
		pipelineDuration:   15 * time.Second, pipelineSessions: 500,
		querySessionMessages: 10000, queryRequests: 200,
	}
}

// Run runs the selected scenarios and returns their results. A scenario that
// fails records its error as its skip reason; Run itself fails only when the
// environment cannot be set up or ctx is cancelled.
func Run(ctx context.Context, o Options) (*Result, error) {
	for _, s := range o.Only {
		if !slices.Contains(Scenarios, s) {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownScenario, s, strings.Join(Scenarios, ", "))
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	e := &env{opts: o, log: o.Log, sizes: sizesFor(o.Quick), res: &Result{}}
	if o.Huge && !o.Quick {
		e.sizes.compactSizes = append(e.sizes.compactSizes, 1000000)
	}
	e.res.Meta = Meta{Quick: o.Quick, Started: time.Now().UTC(), GoVersion: runtime.Version(), GOOS: runtime.GOOS,
		GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: cpuModel(), Storage: "file"}
	stop, err := e.connect(ctx)
	defer stop()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := e.runScenarios(ctx, start); err != nil {
		return nil, err
	}
	if err := e.cleanup(ctx); err != nil {
		e.progress("cleanup: %v", err)
	}
	e.res.Meta.DurationS = time.Since(start).Seconds()
	e.res.Targets = targets(e.res)
	return e.res, nil
}

// connect starts the embedded server in a temporary directory (unless
// Options.URL names one) and connects to it; stop (always set) closes the
// connection and stops the server.
func (e *env) connect(ctx context.Context) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	o := e.opts
	if o.URL == "" {
		dir, err := os.MkdirTemp("", "recall-bench-")
		if err != nil {
			return stop, fmt.Errorf("creating the store directory: %w", err)
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		srv, err := embedded.Start(embedded.Options{DataDir: dir})
		if err != nil {
			return stop, err
		}
		closers = append(closers, func() { srv.Shutdown(); srv.WaitForShutdown() })
		e.url = srv.ClientURL()
		e.res.Meta.NATS = "embedded nats-server " + server.VERSION + " (file storage, temp dir)"
	} else {
		e.url = o.URL
	}
	nc, err := nats.Connect(e.url, nats.Name("recall-bench"))
	if err != nil {
		return stop, fmt.Errorf("connecting to NATS at %s: %w", e.url, err)
	}
	closers = append(closers, nc.Close)
	if o.URL != "" {
		e.res.Meta.NATS = "external nats-server " + nc.ConnectedServerVersion()
	}
	e.nc = nc
	e.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(asyncWindow))
	if err != nil {
		return stop, fmt.Errorf("creating the JetStream context: %w", err)
	}
	if o.URL != "" && !o.Force {
		if err := e.checkEmpty(ctx); err != nil {
			return stop, err
		}
	}
	return stop, nil
}

// checkEmpty fails with ErrServerHasData when the server's transcript (its
// shard streams, or the single stream of a deployment before shards)
// holds records.
func (e *env) checkEmpty(ctx context.Context) error {
	names := []string{provision.StreamLegacyTranscript}
	if l, err := provision.DiscoverLayout(ctx, e.js); err == nil {
		names = append(names, l.Streams()...)
	}
	for _, name := range names {
		if s, err := e.js.Stream(ctx, name); err == nil && s.CachedInfo().State.Msgs > 0 {
			return fmt.Errorf("%w: %s holds %d messages; use a scratch server or --force", ErrServerHasData, name, s.CachedInfo().State.Msgs)
		}
	}
	return nil
}

// scenario is one selectable scenario: how to run it and where to say why
// it was skipped.
type scenario struct {
	name string
	run  func(context.Context, *env) error
	skip func(string)
}

// typicalS is how long each scenario took in a full and a quick run on a
// 2-core machine (docs/benchmarks.md): the ETA printed before each scenario
// is the sum of what is left, scaled by how this run compares.
var typicalS = map[string][2]float64{ScenarioRaw: {10, 2}, ScenarioIngest: {25, 5}, ScenarioTrigger: {90, 14},
	ScenarioCompaction: {13, 3}, ScenarioExtraction: {32, 4}, ScenarioPipeline: {100, 12}, ScenarioQuery: {15, 2}, ScenarioGateway: {20, 6}}

// runScenarios runs the selected scenarios in order, each on freshly
// provisioned streams; a scenario that fails or cannot run is recorded as
// skipped with the reason, only a cancelled ctx stops the run.
func (e *env) runScenarios(ctx context.Context, start time.Time) error {
	selected := func(name string) bool { return len(e.opts.Only) == 0 || slices.Contains(e.opts.Only, name) }
	steps := []scenario{
		{ScenarioRaw, runRaw, func(r string) { e.res.Raw.Skipped = r }},
		{ScenarioIngest, runIngest, func(r string) { e.res.Ingest.Skipped = r }},
		{ScenarioTrigger, runTrigger, func(r string) { e.res.Trigger.Skipped = r }},
		{ScenarioCompaction, runCompaction, func(r string) { e.res.Compaction.Skipped = r }},
		{ScenarioExtraction, runExtraction, func(r string) { e.res.Extraction.Skipped = r }},
		{ScenarioPipeline, runPipeline, func(r string) { e.res.Pipeline.Skipped = r }},
		{ScenarioQuery, runQuery, func(r string) { e.res.Query.Skipped = r }},
		{ScenarioGateway, runGateway, func(r string) { e.res.Gateway.Skipped = r }},
	}
	var todo []string
	for _, st := range steps {
		if selected(st.name) {
			todo = append(todo, st.name)
		}
	}
	eta := newETA(todo, typicalS, e.opts.Quick)
	for _, st := range steps {
		if !selected(st.name) {
			st.skip("not selected (--only)")
			continue
		}
		e.res.Meta.Scenarios = append(e.res.Meta.Scenarios, st.name)
		e.progress("== %s (%s)", st.name, eta.before(st.name, time.Since(start)))
		t0 := time.Now()
		if err := e.runScenario(ctx, st); err != nil {
			return err
		}
		e.progress("   %s took %s", st.name, time.Since(t0).Round(time.Millisecond))
		// The event corpus is shared by raw and ingest only; held for the
		// rest of the run (≈ 340 MB) it slowed every later scenario
		// (extraction efficiency 0.81 alone, 0.65 after ingest).
		if st.name != ScenarioRaw || !selected(ScenarioIngest) {
			releaseCorpora()
		}
		eta.finished(st.name, time.Since(t0))
	}
	return nil
}

// runScenario resets the streams and runs st, profiled when asked; it
// returns an error only when ctx ended.
func (e *env) runScenario(ctx context.Context, st scenario) error {
	err := e.reset(ctx)
	if err == nil {
		stopProfile := e.startProfile(st.name)
		err = st.run(ctx, e)
		stopProfile()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w (cause: %v; scenario error: %v)", st.name, ctx.Err(), context.Cause(ctx), err)
	}
	if reason, ok := isSkip(err); ok {
		e.progress("   %s skipped: %s", st.name, reason)
		st.skip(reason)
	} else if err != nil {
		e.progress("   %s failed: %v", st.name, err)
		st.skip("failed: " + err.Error())
	}
	return nil
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.opts.Progress, format+"\n", args...)
}

// benchShards is the bench's transcript shard count S. Every replica
// count the bench runs (1, 2 and 4 trigger replicas) divides it, so the
// group gives each replica the same number of shards (S/R) and the most
// one replica receives is 1/R of the records up to how unevenly the
// sessions hash over the shards (trigger.replicas_scaling's
// delivered_fraction ≤ 1.1/R); with 8 shards over 4 replicas each holds
// two, whose sum varies less than one shard would. More shards would even
// the hash out further but add a consumer, a pull and a lane per shard to
// every reader on a 2-core machine.
const benchShards = 8

// provisionConfig is the provisioning every scenario uses: file storage,
// the service defaults, benchShards transcript shards.
func (e *env) provisionConfig() provision.Config {
	return provision.Config{Partitions: 16, Shards: benchShards}
}

// layout is the transcript's shard layout of the bench's streams.
func (e *env) layout() events.Layout { return e.provisionConfig().Layout() }

// benchStreams are the scratch streams the raw scenario creates.
var benchStreams = []string{rawStream, "KV_" + rawBucket}

// recallStreams lists the streams behind Recall's streams and buckets.
func recallStreams(c provision.Config) []string {
	var out []string
	for _, s := range provision.Streams(c) {
		out = append(out, s.Name)
	}
	for _, b := range provision.Buckets(c) {
		out = append(out, "KV_"+b.Bucket)
	}
	return out
}

// reset deletes every Recall and bench stream and provisions Recall again.
func (e *env) reset(ctx context.Context) error {
	if err := e.cleanup(ctx); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := provision.Ensure(pctx, e.js, e.provisionConfig()); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	return nil
}

func (e *env) cleanup(ctx context.Context) error {
	for _, name := range append(recallStreams(e.provisionConfig()), benchStreams...) {
		if err := e.js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("deleting stream %s: %w", name, err)
		}
	}
	return nil
}

// startProfile starts a CPU profile of scenario when Options.ProfileDir is
// set and returns the function that stops it.
func (e *env) startProfile(scenario string) func() {
	if e.opts.ProfileDir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(e.opts.ProfileDir, scenario+".cpu.pprof"))
	if err != nil {
		e.progress("   profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		e.progress("   profile: %v", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// eta estimates the time left of a run from typical scenario durations,
// scaled by how the finished scenarios compared with theirs.
type eta struct {
	todo     []string
	typical  map[string]float64
	typSpent float64 // typical seconds of the finished scenarios
	spent    float64 // their measured seconds
	done     int
}

func newETA(todo []string, typical map[string][2]float64, quick bool) *eta {
	e := &eta{todo: todo, typical: map[string]float64{}}
	for name, t := range typical {
		if quick {
			e.typical[name] = t[1]
		} else {
			e.typical[name] = t[0]
		}
	}
	return e
}

// before describes the position of scenario name: its number, the time
// spent and about how much is left.
func (e *eta) before(name string, elapsed time.Duration) string {
	left := 0.0
	for _, n := range e.todo[e.done:] {
		left += e.typical[n]
	}
	if e.typSpent > 0 {
		left *= e.spent / e.typSpent
	}
	return fmt.Sprintf("%d/%d, %s elapsed, about %s left", e.done+1, len(e.todo),
		elapsed.Round(time.Second), (time.Duration(left) * time.Second).Round(time.Second))
}

func (e *eta) finished(name string, took time.Duration) {
	e.done++
	e.typSpent += e.typical[name]
	e.spent += took.Seconds()
}
