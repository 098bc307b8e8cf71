package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// SoakOptions configures `recall bench --soak`.
type SoakOptions struct {
	// Duration is the whole soak: a capacity measurement (a burst and the
	// pipeline catching up), then phases at half of it (at least 30 s).
	Duration time.Duration
	// Binary is the recall executable the services run from (empty: this
	// process's own executable, which is recall when run as `recall bench`).
	Binary string
	// Progress receives one line per phase; nil discards.
	Progress io.Writer
	// ProfileDir, when set, receives a heap profile of this process (the
	// NATS server and the load) at the end of each phase
	// (soak-heap-<phase>.pprof).
	ProfileDir string
}

// ErrSoakTooShort is returned for a soak shorter than 30 s.
var ErrSoakTooShort = errors.New("a soak needs at least 30s")

// soakEnv is a running soak: the embedded NATS server in this process and
// every service as a child process.
type soakEnv struct {
	o      SoakOptions
	dir    string
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	layout events.Layout
	procs  []*soakProc
	edge   *soakProc
	// stopProcs ends the services' supervision (no restart after close).
	stopProcs context.CancelFunc
}

// Soak runs Recall under steady traffic at half of its measured capacity,
// SIGKILLing one service per phase in turn, and reports per phase the
// processes' RSS, goroutines and descriptors, the streams' and buckets'
// sizes, extraction lag and compaction latency; at the end every event the
// edge acknowledged is looked up in the transcript (lost, duplicated).
//
// The services run as child processes (`recall <service>`), so a kill is a
// real SIGKILL: no drain, no deferred cleanup. The NATS server runs in this
// process and is never killed. The data directory and the services' logs
// are in a temporary directory, removed after a clean run and kept (and
// named) when anything was lost, duplicated or exited on its own.
func Soak(ctx context.Context, o SoakOptions) (*SoakReport, error) {
	if o.Duration < 30*time.Second {
		return nil, fmt.Errorf("%w (got %s)", ErrSoakTooShort, o.Duration)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the recall executable: %w", err)
		}
		o.Binary = exe
	}
	rep := &SoakReport{Meta: Meta{Started: time.Now().UTC(), GoVersion: runtime.Version(), GOOS: runtime.GOOS,
		GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: cpuModel(), Storage: "file", Scenarios: []string{"soak"}}}
	e := &soakEnv{o: o}
	defer e.close(rep)
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	rep.Meta.NATS = "embedded nats-server " + server.VERSION + " (file storage, temp dir); services: child processes of " + o.Binary
	start := time.Now()
	if err := e.run(ctx, &rep.Soak); err != nil {
		return nil, err
	}
	rep.Meta.DurationS = round1(time.Since(start).Seconds())
	return rep, nil
}

// start starts the server, provisions with the RECALL_* settings the
// services read too, sets the trigger thresholds and starts every service.
func (e *soakEnv) start(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "recall-soak-")
	if err != nil {
		return fmt.Errorf("creating the soak directory: %w", err)
	}
	e.dir = dir
	ctx, e.stopProcs = context.WithCancel(ctx)
	if e.srv, err = embedded.Start(embedded.Options{DataDir: filepath.Join(dir, "nats")}); err != nil {
		return err
	}
	if e.nc, err = nats.Connect(e.srv.ClientURL(), nats.Name("recall-soak")); err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	e.js, _ = jetstream.New(e.nc)
	var pc provision.Config
	if err := envconfig.Process("RECALL", &pc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	e.layout = pc.Layout()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := provision.Ensure(pctx, e.js, pc); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	if _, err := tenantcfg.Put(pctx, e.js, ingestsvc.DefaultTenant, benchThresholds); err != nil {
		return fmt.Errorf("setting the tenant thresholds: %w", err)
	}
	addrs, err := freeAddrs(len(soakServices))
	if err != nil {
		return err
	}
	for i, name := range soakServices {
		p := newSoakProc(e.o.Binary, name, e.srv.ClientURL(), addrs[i], filepath.Join(dir, name+".log"))
		if err := p.start(ctx); err != nil {
			return err
		}
		e.procs = append(e.procs, p)
		if name == "ingest" {
			e.edge = p
		}
	}
	for _, p := range e.procs {
		if err := p.waitReady(ctx, 90*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// soakPlan splits what is left of the soak after the capacity
// measurement into phases of about three minutes (at least 4, at most 20,
// none shorter than 5 s).
func soakPlan(left time.Duration) (phases int, phase time.Duration, err error) {
	phases = min(max(int(left/(3*time.Minute)), 4), 20)
	if phase = left / time.Duration(phases); phase < 5*time.Second {
		return 0, 0, fmt.Errorf("%w: the capacity measurement left %s for the phases", ErrSoakTooShort, left.Round(time.Second))
	}
	return phases, phase, nil
}

// capacity is what the whole pipeline absorbs: the events one client
// stores through the edge in a burst, divided by the time until every
// consumer has caught up with them (trigger, extractions, indexer,
// long-term memory).
func (e *soakEnv) capacity(ctx context.Context, load *soakLoad) (float64, error) {
	burst := min(max(e.o.Duration/20, 5*time.Second), 30*time.Second)
	t0 := time.Now()
	bctx, cancel := context.WithTimeout(ctx, burst)
	load.pace(ctx, bctx, 0)
	cancel()
	sent := time.Since(t0)
	d, err := drain(ctx, e.js, e.layout, 5*time.Minute)
	if err != nil {
		return 0, err
	}
	acked, _, _ := load.counts()
	fmt.Fprintf(e.o.Progress, "soak: burst of %d events in %s, pipeline caught up %s later\n", acked, sent.Round(time.Millisecond), d.Round(time.Millisecond))
	return rate(acked, time.Since(t0)), nil
}

// run measures the capacity, runs the phases at half of it and checks
// every acknowledged event.
func (e *soakEnv) run(ctx context.Context, r *SoakResult) error {
	cl, err := client.NewHTTP(client.HTTPConfig{URL: "http://" + e.edge.ops, Window: 2 * time.Minute})
	if err != nil {
		return err
	}
	lw, err := watchLags(e.nc)
	if err != nil {
		return err
	}
	defer lw.sub.Unsubscribe()
	load := newSoakLoad(cl)
	t0 := time.Now()
	capacity, err := e.capacity(ctx, load)
	if err != nil {
		return err
	}
	r.CapacityEventsPerS, r.RateEventsPerS = round1(capacity), round1(capacity/2)
	phases, phaseDur, err := soakPlan(e.o.Duration - time.Since(t0))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.o.Progress, "soak: capacity %.0f events/s; %d phases of %s at %.0f events/s, one service SIGKILLed per phase\n",
		r.CapacityEventsPerS, phases, phaseDur.Round(time.Second), r.RateEventsPerS)
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); load.pace(ctx, lctx, r.RateEventsPerS) }()
	go func() { defer wg.Done(); load.probeCompactions(lctx) }()
	lw.take()
	load.takeCompactions()
	err = e.phases(lctx, r, load, lw, phases, phaseDur, t0)
	stopLoad()
	wg.Wait()
	if err != nil {
		return err
	}
	return e.finish(ctx, r, load, t0)
}

// phases runs the phases: a SIGKILL halfway through each, a sample at its
// end.
func (e *soakEnv) phases(ctx context.Context, r *SoakResult, load *soakLoad, lw *lagWatch, n int, d time.Duration, t0 time.Time) error {
	prev, _, _ := load.counts()
	for i := range n {
		if !retry.Pause(ctx.Done(), d/2) {
			return ctx.Err()
		}
		victim := e.procs[i%len(e.procs)]
		if err := victim.kill(); err != nil {
			return err
		}
		r.Kills++
		if !retry.Pause(ctx.Done(), d-d/2) {
			return ctx.Err()
		}
		p, err := e.sample(ctx, i+1, load, lw)
		if err != nil {
			return err
		}
		acked, _, _ := load.counts()
		p.Events, prev = acked-prev, acked
		p.Killed, p.EndS = victim.name, round1(time.Since(t0).Seconds())
		r.Phases = append(r.Phases, p)
		fmt.Fprintf(e.o.Progress, "soak: phase %d/%d (%.0f s): %d events, killed %s, lag p99 %.0f ms, compact p99 %.0f ms, services RSS %.1f MiB, goroutines %d, fds %d, bench RSS %.1f MiB, backlog %d\n",
			i+1, n, p.EndS, p.Events, p.Killed, p.LagP99MS, p.CompactP99MS, mib(p.RSSBytes), p.Goroutines, p.FDs, mib(benchRSS(p)), p.Backlog)
	}
	return nil
}

// sample takes a phase's figures.
func (e *soakEnv) sample(ctx context.Context, phase int, load *soakLoad, lw *lagWatch) (SoakPhase, error) {
	p := SoakPhase{Phase: phase}
	lags, err := extractionLags(ctx, e.js, e.layout, lw.take())
	if err != nil {
		return p, err
	}
	if p.LagSamples = len(lags); len(lags) > 0 {
		p.LagP50MS, p.LagP99MS = round1(lags.percentile(50)/1000), round1(lags.percentile(99)/1000)
	}
	comp, outcomes := load.takeCompactions()
	if len(comp) > 0 {
		p.CompactP99MS = round1(comp.percentile(99) / 1000)
	}
	p.Compactions = outcomes
	if e.o.ProfileDir != "" {
		if err := writeHeapProfile(filepath.Join(e.o.ProfileDir, fmt.Sprintf("soak-heap-%d.pprof", phase))); err != nil {
			return p, err
		}
	}
	self := procSample("bench", os.Getpid())
	self.Goroutines = int64(runtime.NumGoroutine())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	self.HeapBytes = int64(ms.HeapAlloc)
	p.Procs = append(p.Procs, self)
	for _, sp := range e.procs {
		p.Procs = append(p.Procs, sp.sample(ctx))
	}
	p.sums()
	if p.Streams, err = streamSizes(ctx, e.js); err != nil {
		return p, err
	}
	p.ConsumerPending = consumerPending(ctx, e.js, e.layout)
	if p.Backlog, err = backlog(ctx, e.js, e.layout); err != nil {
		return p, err
	}
	return p, nil
}

// finish checks every acknowledged event against the transcript and sets
// the verdicts.
func (e *soakEnv) finish(ctx context.Context, r *SoakResult, load *soakLoad, t0 time.Time) error {
	r.Acknowledged, r.DuplicateAcks, r.NotStored = load.counts()
	stored, err := storedIDs(ctx, e.js, e.layout)
	if err != nil {
		return fmt.Errorf("reading the transcript back: %w", err)
	}
	r.Lost, r.Duplicated, r.Checked, r.Examples = verdict(load.expected(), stored)
	for _, p := range e.procs {
		p.mu.Lock()
		r.UncleanExits += p.unclean
		p.mu.Unlock()
	}
	r.growth()
	r.DurationS = round1(time.Since(t0).Seconds())
	return nil
}

// close stops the services (SIGTERM: each must stop cleanly) and the
// server, and removes the directory unless the run found something.
func (e *soakEnv) close(rep *SoakReport) {
	if e.stopProcs != nil {
		e.stopProcs()
	}
	for _, p := range e.procs {
		if err := p.stop(); err != nil {
			rep.Soak.StopErrors = append(rep.Soak.StopErrors, err.Error())
		}
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	r := rep.Soak
	if r.Lost+r.Duplicated+r.UncleanExits+len(r.StopErrors) > 0 || r.Checked == 0 {
		rep.Soak.KeptDir = e.dir
		return
	}
	os.RemoveAll(e.dir)
}

// writeHeapProfile writes this process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return errors.Join(pprof.WriteHeapProfile(f), f.Close())
}
