package reliability

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// Tenants and their bearer tokens.
const (
	tenantA = "acme"
	tenantB = "globex"
	tokenA  = "tok-acme-7f3a9c1e"
	tokenB  = "tok-globex-41bd22e0"
)

// logSink collects every log line of a run (for the secret checks) and
// keeps the last lines to print when a test fails.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// tail returns the last n lines.
func (s *logSink) tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// proc is one running service instance.
type proc struct {
	name   string
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	stopped bool
	err     error
}

// stop cancels the instance and waits for Run to return, at most d. Later
// calls return the first call's result at once.
func (p *proc) stop(d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return p.err
	}
	p.stopped = true
	p.cancel()
	select {
	case p.err = <-p.done:
	case <-time.After(d):
		p.err = fmt.Errorf("%s did not stop within %v", p.name, d)
	}
	return p.err
}

// harness runs Recall's services in process against one embedded NATS
// server with a file store.
type harness struct {
	t     *testing.T
	srv   *natstest.Server
	url   string
	admin *nats.Conn
	js    jetstream.JetStream
	logs  *logSink
	log   *slog.Logger
	prov  provision.Config
	// natsCfg is the connection configuration every service gets.
	natsCfg natsconn.Config

	// ServiceAuth, when set for a service name, replaces the connection
	// credentials of that service (per-service NATS users).
	ServiceAuth map[string]natsconn.Config

	// Provider is the extractors' model (set before starting extractors).
	Provider llm.Provider
	// Tweak functions adjust service configurations before start.
	TweakTrigger   func(*triggersvc.Config)
	TweakExtractor func(*extractorsvc.Config)
	TweakCompactor func(*compactorsvc.Config)
	TweakIngest    func(*ingestsvc.Config)

	incarnation atomic.Int64
	mu          sync.Mutex
	procs       []*proc
	ingest      *ingestsvc.Service
}

func newHarness(t *testing.T) *harness {
	return newHarnessWith(t, &server.Options{}, natsconn.Config{})
}

// newHarnessWith starts the server with o; every service and the admin
// connection authenticate with auth's credentials (URL is filled in).
func newHarnessWith(t *testing.T, o *server.Options, auth natsconn.Config) *harness {
	t.Helper()
	h := &harness{t: t, logs: &logSink{}}
	h.srv = natstest.StartWith(t, o)
	h.url = h.srv.ClientURL()
	h.natsCfg = auth
	h.natsCfg.URL = h.url
	h.log = telemetry.NewLogger(h.logs, telemetry.Config{LogLevel: "debug", LogFormat: "json"})
	h.prov = provision.Config{Partitions: 4, MemoryHistory: 64}
	adminOpts, err := h.natsCfg.Options("reliability-admin")
	if err != nil {
		t.Fatal(err)
	}
	h.admin, h.js = h.srv.Connect(t, adminOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, h.js, h.prov); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stopAll()
		if t.Failed() {
			t.Logf("last log lines:\n%s", h.logs.tail(40))
		}
		// RELIABILITY_LOGS=1 keeps the logs of passing runs too.
		if t.Failed() || os.Getenv("RELIABILITY_LOGS") != "" {
			if f, err := os.CreateTemp("", "recall-reliability-*.log"); err == nil {
				_, _ = f.WriteString(h.logs.String())
				_ = f.Close()
				t.Logf("all service logs: %s", f.Name())
			}
		}
	})
	return h
}

// start runs run in a goroutine as a supervised instance: when Run returns
// an error while the instance is meant to run (NATS down at start), it is
// started again after a short pause, as a process supervisor would.
func (h *harness) start(name string, run func(ctx context.Context) error) *proc {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{name: name, cancel: cancel, done: make(chan error, 1)}
	go func() {
		var err error
		for {
			err = run(ctx)
			if ctx.Err() != nil {
				break
			}
			h.log.Warn("service exited; restarting", "instance", name, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			if ctx.Err() != nil {
				break
			}
		}
		p.done <- err
	}()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p
}

func (h *harness) stopAll() {
	h.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func(p *proc) { defer wg.Done(); _ = p.stop(10 * time.Second) }(p)
	}
	wg.Wait()
	if h.ingest != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = h.ingest.Shutdown(ctx)
		cancel()
		h.ingest = nil
	}
}

func (h *harness) logger(name string) *slog.Logger { return h.log.With("service", name) }

// natsFor returns the connection configuration of service.
func (h *harness) natsFor(service string) natsconn.Config {
	if c, ok := h.ServiceAuth[service]; ok {
		c.URL = h.url
		return c
	}
	return h.natsCfg
}

// startTrigger starts one trigger instance.
func (h *harness) startTrigger() *proc {
	cfg := triggersvc.Config{NATS: h.natsFor("trigger"), Config: h.prov,
		MinTokensToInit: 1500, MinTokensBetweenUpdate: 1500, ToolCallsBetweenUpdates: 3,
		ResponseQuietPeriod: 200 * time.Millisecond, AckWait: 5 * time.Second, PinnedTTL: 2 * time.Second,
		ExtractTimeout: 20 * time.Second}
	if h.TweakTrigger != nil {
		h.TweakTrigger(&cfg)
	}
	name := fmt.Sprintf("trigger-%d", h.incarnation.Add(1))
	log := h.logger(name)
	log.Info("starting", "config", cfg)
	return h.start(name, func(ctx context.Context) error { return triggersvc.Run(ctx, cfg, log) })
}

// startExtractor starts one extractor worker using h.Provider.
func (h *harness) startExtractor() *proc {
	name := fmt.Sprintf("extractor-%d", h.incarnation.Add(1))
	cfg := extractorsvc.Config{NATS: h.natsFor("extractor"), Config: h.prov, Provider: h.Provider, WorkerID: name,
		AckWait: 5 * time.Second, HeartbeatTTL: 2 * time.Second, FetchWait: time.Second,
		StaleThreshold: 5 * time.Second, Concurrency: 4, DrainTimeout: 2 * time.Second}
	if h.TweakExtractor != nil {
		h.TweakExtractor(&cfg)
	}
	log := h.logger(name)
	log.Info("starting", "config", cfg)
	return h.start(name, func(ctx context.Context) error { return extractorsvc.Run(ctx, cfg, log) })
}

// startCompactor starts one compactor instance (no LLM fallback).
func (h *harness) startCompactor() *proc {
	cfg := compactorsvc.Config{NATS: h.natsFor("compactor"), Config: h.prov, FullCompact: false,
		WaitTimeout: 2 * time.Second, StaleThreshold: 5 * time.Second}
	if h.TweakCompactor != nil {
		h.TweakCompactor(&cfg)
	}
	name := fmt.Sprintf("compactor-%d", h.incarnation.Add(1))
	log := h.logger(name)
	log.Info("starting", "config", cfg)
	return h.start(name, func(ctx context.Context) error { return compactorsvc.Run(ctx, cfg, log) })
}

// startIngest starts the ingest service with tenants A and B on a random
// loopback port and returns its base URL.
func (h *harness) startIngest() string {
	h.t.Helper()
	cfg := ingestsvc.Config{NATS: h.natsFor("ingest"), Config: h.prov, HTTPAddr: "127.0.0.1:0",
		Tenants:    tenantA + ":" + ingestsvc.HashToken(tokenA) + "," + tenantB + ":" + ingestsvc.HashToken(tokenB),
		APITimeout: 10 * time.Second}
	if h.TweakIngest != nil {
		h.TweakIngest(&cfg)
	}
	log := h.logger("ingest")
	log.Info("starting", "config", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := ingestsvc.Start(ctx, cfg, log)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ingest = s
	return "http://" + s.Addr()
}

// waitFor polls cond until it holds, failing the test after d.

// httpDo sends a request with a bearer token and returns status and body.
func httpDo(t testing.TB, method, url, token, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}
