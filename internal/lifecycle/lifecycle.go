// Package lifecycle runs the part of a service's life every Recall service
// shares, in one order:
//
//  1. Start: connect to NATS and provision (provision.Open, retrying until
//     the context ends), then listen for the operational endpoints
//     (/healthz, /readyz, /metrics). A listen error is returned: a service
//     whose probes cannot be served does not run. A context that ends
//     first returns ErrStopped, a clean stop. A service that asks for it
//     (Config.KeepBalanced) then keeps the NATS leaders of the transcript's
//     shards spread (provision.KeepBalanced) until Stop.
//  2. The component starts its work — on the connection Start made and on
//     any further ones it opens with Connect, behind an HTTP edge it serves
//     with ServeHTTP — and calls SetReady once it consumes (or serves);
//     until then /readyz answers "starting".
//  3. Stop (or Shutdown), after the component's own work ended: readiness
//     goes false; the HTTP edges stop taking requests and finish the ones
//     in flight (each within its grace); the micro services given to Adopt
//     stop taking requests; what answers requests in flight (Await: a
//     microapi.Later) finishes within its bound; the leader balancer and
//     the steps given to OnStop run; the operational server shuts down;
//     the connections drain —
//     those Connect opened first, then the service's own, each within
//     DrainTimeout.
//
// What is not shared stays with the component: how it stops consuming and
// what it finishes first (publications awaited before acknowledging).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/ops"
	"github.com/recallhq/recall/internal/provision"
)

// DrainTimeout bounds the drain of the connection at Stop.
const DrainTimeout = 5 * time.Second

// ErrStopped is returned by Start when its context ended before the service
// was up: a stop while starting, which callers treat as a clean stop.
var ErrStopped = errors.New("stopped while starting")

// Config is what Start needs.
type Config struct {
	Name      string // the connection and log name, e.g. "recall-trigger"
	NATS      natsconn.Config
	Provision provision.Config
	// OpsAddr is the listen address of the operational endpoints; empty
	// serves none.
	OpsAddr string
	// JetStreamOpts are passed to jetstream.New.
	JetStreamOpts []jetstream.JetStreamOpt
	// KeepBalanced runs provision.KeepBalanced on the service's connection
	// from Start to Stop: every Provision.BalanceEvery it spreads the
	// leaders of the shard streams and of their durable consumers over
	// the NATS nodes (nothing on a single server). One service of a
	// deployment asks for it (ingest); more would only look more often.
	KeepBalanced bool
}

// Service is a started service's shared part. Its methods are safe for
// concurrent use.
type Service struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	cfg Config
	log *slog.Logger

	ready    atomic.Pointer[func() error]
	stopping atomic.Bool
	mu       sync.Mutex
	edges    []edge
	micro    []micro.Service
	awaits   []Finisher
	onStop   []func()
	conns    []*nats.Conn
	ops      *http.Server
	opsAddr  string
	opsDone  chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Finisher finishes the requests a component answers after their handler
// returned (a microapi.Later): Stop calls it once the micro services
// stopped taking requests and before the connections drain; it returns
// within its own bound, or when ctx ends.
type Finisher interface{ Stop(ctx context.Context) }

// edge is an HTTP server ServeHTTP runs.
type edge struct {
	srv   *http.Server
	grace time.Duration
	done  chan struct{}
}

// Start connects, provisions and starts the operational endpoints. It
// returns ErrStopped when ctx ended first.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Service, error) {
	nc, js, err := provision.Open(ctx, cfg.NATS, cfg.Provision, cfg.Name, log, cfg.JetStreamOpts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrStopped
		}
		return nil, err
	}
	s := &Service{NC: nc, JS: js, cfg: cfg, log: log, opsDone: make(chan struct{})}
	if err := s.serveOps(); err != nil {
		nc.Close()
		return nil, err
	}
	if cfg.KeepBalanced {
		s.keepBalanced(ctx)
	}
	return s, nil
}

// serveOps serves the operational endpoints on cfg.OpsAddr (none when it
// is empty) until Stop.
func (s *Service) serveOps() error {
	if s.cfg.OpsAddr == "" {
		close(s.opsDone)
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.OpsAddr)
	if err != nil {
		return fmt.Errorf("listening for the operational endpoints on %s: %w", s.cfg.OpsAddr, err)
	}
	s.ops = &http.Server{Handler: ops.Handler(s.check), ReadHeaderTimeout: 10 * time.Second}
	s.opsAddr = ln.Addr().String()
	s.log.Info("serving operational endpoints", "addr", s.opsAddr)
	go func() {
		defer close(s.opsDone)
		if err := s.ops.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("operational endpoints stopped", "err", err)
		}
	}()
	return nil
}

// keepBalanced runs provision.KeepBalanced until Stop, which cancels it
// (a pass under way ends with its requests) and waits for it before the
// connections drain. It outlives ctx, which may bound the start only.
func (s *Service) keepBalanced(ctx context.Context) {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		provision.KeepBalanced(bctx, s.JS, s.cfg.Provision, s.log)
	}()
	s.OnStop(func() {
		cancel()
		<-done
	})
}

// SetReady sets the component's readiness check (nil error = ready). Until
// it is called the service is not ready.
func (s *Service) SetReady(check func() error) { s.ready.Store(&check) }

// check is /readyz: connected, not stopping, and the component ready.
func (s *Service) check() error {
	switch {
	case s.stopping.Load():
		return errors.New("stopping")
	case !s.NC.IsConnected():
		return errors.New("NATS is not connected")
	}
	c := s.ready.Load()
	if c == nil {
		return errors.New("starting")
	}
	return (*c)()
}

// OpsAddr is the address the operational endpoints listen on ("" when
// none).
func (s *Service) OpsAddr() string { return s.opsAddr }

// Ready reports the readiness /readyz reports.
func (s *Service) Ready() error { return s.check() }

// Adopt hands micro services to Stop, which stops them before the
// requests in flight are awaited.
func (s *Service) Adopt(ms ...micro.Service) {
	s.mu.Lock()
	s.micro = append(s.micro, ms...)
	s.mu.Unlock()
}

// Await hands Stop what answers requests after their handler returned;
// Stop calls each in turn after the micro services stopped.
func (s *Service) Await(fs ...Finisher) {
	s.mu.Lock()
	s.awaits = append(s.awaits, fs...)
	s.mu.Unlock()
}

// OnStop hands Stop a step of the component to run once the requests in
// flight ended, before the connections drain (a guard, a sweeper). Steps
// run in the order given and must return promptly.
func (s *Service) OnStop(step func()) {
	s.mu.Lock()
	s.onStop = append(s.onStop, step)
	s.mu.Unlock()
}

// Connect opens a further connection of the service (a lane of its own for
// bulk reads or replies), named name in the server and the logs; Stop
// drains it before the service's own connection.
func (s *Service) Connect(name string) (*nats.Conn, error) {
	nc, err := natsconn.ConnectLogged(s.cfg.NATS, name, s.log)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.conns = append(s.conns, nc)
	s.mu.Unlock()
	return nc, nil
}

// ServeHTTP serves srv on ln as the component's HTTP edge until Stop,
// which shuts it down first — no new requests, the ones in flight
// finishing for at most grace. The channel receives the error that ended
// serving otherwise (it is never closed).
func (s *Service) ServeHTTP(srv *http.Server, ln net.Listener, grace time.Duration) <-chan error {
	errc := make(chan error, 1)
	e := edge{srv: srv, grace: grace, done: make(chan struct{})}
	s.mu.Lock()
	s.edges = append(s.edges, e)
	s.mu.Unlock()
	go func() {
		defer close(e.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return errc
}

// Stop ends the shared part, in order and bounded (see the package
// comment). Later calls do nothing.
func (s *Service) Stop() { _ = s.Shutdown(context.Background()) }

// Shutdown is Stop with ctx bounding the waits for requests in flight
// besides their own bounds. It returns what did not end cleanly (an HTTP
// edge whose requests did not finish, a connection that did not drain);
// later calls return the first call's result.
func (s *Service) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		s.mu.Lock()
		edges, ms, awaits, steps, conns := s.edges, s.micro, s.awaits, s.onStop, s.conns
		s.mu.Unlock()
		errs := s.stopEdges(ctx, edges)
		for _, m := range ms {
			if err := m.Stop(); err != nil {
				s.log.Warn("stopping micro service", "err", err)
			}
		}
		for _, f := range awaits {
			f.Stop(ctx)
		}
		for _, step := range steps {
			step()
		}
		if s.ops != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.ops.Shutdown(sctx)
			cancel()
		}
		<-s.opsDone
		errs = append(errs, drainAll(conns, s.log)...)
		if err := drain(s.NC, s.log); err != nil {
			errs = append(errs, err)
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// stopEdges shuts the HTTP edges down, each waiting for its requests at
// most its grace (and never past ctx).
func (s *Service) stopEdges(ctx context.Context, edges []edge) []error {
	var errs []error
	for _, e := range edges {
		sctx, cancel := context.WithTimeout(ctx, e.grace)
		if err := e.srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down the HTTP edge: %w", err))
			_ = e.srv.Close()
		}
		cancel()
		<-e.done
	}
	return errs
}

// drainAll drains conns at once, each within DrainTimeout.
func drainAll(conns []*nats.Conn, log *slog.Logger) []error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, nc := range conns {
		wg.Go(func() { errs[i] = drain(nc, log) })
	}
	wg.Wait()
	return errs
}

// drain drains nc, waiting at most DrainTimeout, then closes it; it
// returns an error when the drain was cut short.
func drain(nc *nats.Conn, log *slog.Logger) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return nil // already closed
	}
	select {
	case <-closed:
		return nil
	case <-time.After(DrainTimeout):
		log.Warn("connection did not drain in time; closing it", "conn", nc.Opts.Name, "timeout", DrainTimeout)
		nc.Close()
		return fmt.Errorf("connection %s did not drain within %s", nc.Opts.Name, DrainTimeout)
	}
}
