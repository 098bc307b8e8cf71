// Package lifecycle runs the part of a service's life every Recall service
// shares, in one order:
//
//  1. Start: connect to NATS and provision (provision.Open, retrying until
//     the context ends), then listen for the operational endpoints
//     (/healthz, /readyz, /metrics). A listen error is returned: a service
//     whose probes cannot be served does not run.
//  2. The component starts its work and calls SetReady once it consumes
//     (or serves); until then /readyz answers "starting".
//  3. Stop, after the component's own work ended: readiness goes false,
//     the micro services given to Adopt stop taking requests, the
//     operational server shuts down, and the connection drains — each step
//     bounded, so Stop returns within DrainTimeout plus a second.
//
// What is not shared stays with the component: how it stops consuming and
// what it finishes first (in-flight requests, publications awaited before
// acknowledging).
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
}

// Service is a started service's shared part. Its methods are safe for
// concurrent use.
type Service struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	log *slog.Logger

	ready    atomic.Pointer[func() error]
	stopping atomic.Bool
	mu       sync.Mutex
	micro    []micro.Service
	ops      *http.Server
	opsAddr  string
	opsDone  chan struct{}
	stopOnce sync.Once
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
	s := &Service{NC: nc, JS: js, log: log, opsDone: make(chan struct{})}
	if cfg.OpsAddr == "" {
		close(s.opsDone)
		return s, nil
	}
	ln, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("listening for the operational endpoints on %s: %w", cfg.OpsAddr, err)
	}
	s.ops = &http.Server{Handler: ops.Handler(s.check), ReadHeaderTimeout: 10 * time.Second}
	s.opsAddr = ln.Addr().String()
	log.Info("serving operational endpoints", "addr", s.opsAddr)
	go func() {
		defer close(s.opsDone)
		if err := s.ops.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("operational endpoints stopped", "err", err)
		}
	}()
	return s, nil
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

// Adopt hands micro services to Stop, which stops them first.
func (s *Service) Adopt(ms ...micro.Service) {
	s.mu.Lock()
	s.micro = append(s.micro, ms...)
	s.mu.Unlock()
}

// Stop ends the shared part, in order and bounded (see the package
// comment). Later calls do nothing.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		s.mu.Lock()
		ms := s.micro
		s.mu.Unlock()
		for _, m := range ms {
			if err := m.Stop(); err != nil {
				s.log.Warn("stopping micro service", "err", err)
			}
		}
		if s.ops != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.ops.Shutdown(sctx)
			cancel()
		}
		<-s.opsDone
		s.drain()
	})
}

// drain drains the connection, waiting at most DrainTimeout, then closes it.
func (s *Service) drain() {
	closed := make(chan struct{})
	s.NC.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := s.NC.Drain(); err != nil {
		s.NC.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(DrainTimeout):
		s.log.Warn("connection did not drain in time; closing it", "timeout", DrainTimeout)
		s.NC.Close()
	}
}
