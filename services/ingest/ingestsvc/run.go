package ingestsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/ops"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/console"
)

// Run serves until ctx is done, then shuts down gracefully (see the package
// comment) and returns nil.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-s.httpErr:
		_ = s.Shutdown(context.Background())
		return fmt.Errorf("serving HTTP: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	return s.Shutdown(sctx)
}

// Service is a running ingest service.
type Service struct {
	cfg     Config
	log     *slog.Logger
	nc      *nats.Conn // JetStream publishing, session API requests
	apiNC   *nats.Conn // the micro service: its subscriptions and replies
	conNC   *nats.Conn // the console's bulk reads (transcripts, listings, live streams)
	eraseNC *nats.Conn // the eraser: purges, its guard's watches
	js      jetstream.JetStream
	svc     micro.Service
	nh      *NATSHandler
	in      *Ingester
	http    *http.Server
	ln      net.Listener
	httpErr chan error
	handler http.Handler
	ready   atomic.Bool
	eraser  *erase.Eraser
	// stopGuard ends the eraser's guard (see erase.Eraser.Guard).
	stopGuard context.CancelFunc
}

// Start connects to NATS, provisions the streams, and starts the HTTP edge
// and the NATS ingest endpoint. Stop it with Shutdown.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	auth, err := NewAuth(cfg.Tenants)
	if err == nil {
		err = auth.SetOperators(cfg.OperatorTokens)
	}
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if auth.Open() {
		log.WarnContext(ctx, "no tenants configured (RECALL_TENANTS is empty): serving the single tenant \"default\" WITHOUT authentication; bind the HTTP edge to localhost only", "http_addr", cfg.HTTPAddr)
	}
	s := &Service{cfg: cfg, log: log, httpErr: make(chan error, 1)}
	s.nc, s.js, err = provision.Open(ctx, cfg.NATS, cfg.Config, "recall-ingest", log,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending), jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout))
	if err != nil {
		return nil, err
	}
	limits := Limits{MaxEventBytes: cfg.MaxEventBytes, MaxBatchEvents: cfg.MaxBatchEvents, MaxBodyBytes: cfg.MaxBodyBytes,
		BodyTimeout: cfg.BodyTimeout, adm: newAdmission(cfg)}
	in := NewIngester(s.js, cfg.Layout(), cfg.MaxEventBytes, cfg.PublishTimeout)
	blobs, err := s.js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		s.nc.Close()
		return nil, fmt.Errorf("opening object store %s: %w", events.BucketBlobs, err)
	}
	// Headroom for the headers ingest adds (dedup id, trace context).
	in.UseClaimCheck(blobs, min(cfg.InlineBytes, int(s.nc.MaxPayload())-64<<10))
	s.in = in
	if err := s.startEraser(); err != nil {
		s.nc.Close()
		return nil, err
	}

	if err := s.startEndpoint(ctx, in, limits); err != nil {
		s.stopGuard()
		s.eraseNC.Close()
		s.nc.Close()
		return nil, err
	}
	if err := s.serveHTTP(ctx, in, auth, limits); err != nil {
		_ = s.svc.Stop()
		s.stopGuard()
		s.eraseNC.Close()
		s.apiNC.Close()
		s.nc.Close()
		return nil, err
	}
	s.ready.Store(true)
	log.InfoContext(ctx, "ingest started", "nats_endpoint", IngestEndpointSubject)
	return s, nil
}

// startEndpoint starts the NATS ingest endpoint on a connection of its
// own; on error nothing of it is left running.
func (s *Service) startEndpoint(ctx context.Context, in *Ingester, limits Limits) error {
	var err error
	s.apiNC, err = natsconn.ConnectLogged(s.cfg.NATS, "recall-ingest-api", s.log)
	if err != nil {
		return err
	}
	s.nh = NewNATSHandler(s.apiNC, in, limits, 1024)
	s.nh.tenantShare(s.cfg.TenantInFlight)
	s.svc, err = micro.AddService(s.apiNC, micro.Config{
		Name:         ServiceName,
		Version:      "1.0.0",
		Description:  "Recall ingest: validates session CloudEvents and stores them on the transcript's shard streams (" + events.StreamTranscriptShardPrefix + "<shard>)",
		StatsHandler: s.nh.Stats,
	})
	if err == nil {
		err = s.svc.AddEndpoint(events.VerbIngest, replyspace.Guard(s.log, s.nh), micro.WithEndpointSubject(IngestEndpointSubject))
	}
	if err == nil {
		err = s.svc.AddEndpoint(events.VerbConfig, replyspace.Guard(s.log, configHandler(s.js, s.log)), micro.WithEndpointSubject(ConfigEndpointSubject))
	}
	if err == nil {
		err = s.svc.AddEndpoint(events.VerbErase, replyspace.Guard(s.log, eraseHandler(s.eraser)), micro.WithEndpointSubject(EraseEndpointSubject))
	}
	if err != nil {
		s.apiNC.Close()
		return fmt.Errorf("starting the NATS ingest endpoint: %w", err)
	}
	// The endpoint serves once the server registered its subscription; a
	// flush that fails (still connecting) only delays that.
	if ferr := s.apiNC.FlushTimeout(5 * time.Second); ferr != nil {
		s.log.WarnContext(ctx, "NATS ingest endpoint not confirmed yet", "err", ferr)
	}
	return nil
}

// serveHTTP builds the HTTP edge (events, the session API, the console,
// operational endpoints) and, with an address configured, listens.
func (s *Service) serveHTTP(ctx context.Context, in *Ingester, auth *Auth, limits Limits) error {
	cfg := s.cfg
	mux := ops.Handler(s.readyErr)
	mux.Handle("POST /v1/events", NewEventsHandler(in, auth, limits))
	NewSessionAPI(s.nc, auth, cfg.APITimeout, limits).Register(mux)
	NewConfigAPI(s.js, auth, limits).Register(mux)
	var err error
	// The console's reads can be large: they get their own connection, so
	// they cannot get the connection that publishes events disconnected.
	if s.conNC, err = natsconn.ConnectLogged(cfg.NATS, "recall-ingest-console", s.log); err != nil {
		return err
	}
	con, err := console.New(s.conNC, cfg.Layout(), auth.Identify, console.Config{Tenants: auth.ConsoleTenants(), Timeout: cfg.APITimeout, Log: s.log,
		Admit: func(w http.ResponseWriter, r *http.Request, tenant, endpoint string) (func(), bool) {
			return admit(r.Context(), w, limits.adm.lane(calls), tenant, endpoint)
		}})
	if err != nil {
		s.conNC.Close()
		return fmt.Errorf("starting the console: %w", err)
	}
	con.Register(mux)
	if err := s.dataAPI(auth, limits).Register(mux); err != nil {
		s.conNC.Close()
		return err
	}
	s.handler = mux
	if cfg.HTTPAddr == "" {
		return nil
	}
	if err := s.listen(ctx, mux, con.Close); err != nil {
		s.conNC.Close()
		return err
	}
	return nil
}

// listen serves mux on the configured address within the connection
// bounds (total, per client IP) and timeouts (headers, idle keep-alive).
func (s *Service) listen(ctx context.Context, mux http.Handler, onShutdown func()) error {
	cfg := s.cfg
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	s.ln = newLimitListener(ln, cfg.MaxConns, cfg.MaxConnsPerIP)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: cfg.HeaderTimeout, IdleTimeout: cfg.IdleTimeout}
	s.http.RegisterOnShutdown(onShutdown)
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.httpErr <- err
		}
	}()
	s.log.InfoContext(ctx, "HTTP edge listening", "addr", s.ln.Addr().String())
	return nil
}

// Addr is the HTTP edge's listen address ("" when HTTP is off).
func (s *Service) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Handler is the HTTP edge's handler (for tests that serve it themselves).
func (s *Service) Handler() http.Handler { return s.handler }

func (s *Service) readyErr() error {
	if !s.ready.Load() {
		return errors.New("shutting down")
	}
	if !s.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, name := range s.cfg.Layout().Streams() {
		if _, err := s.js.Stream(ctx, name); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
	}
	return nil
}

// Shutdown stops accepting requests, waits for in-flight ones (HTTP and
// NATS) to be answered after their acknowledgements, stops the micro
// service and drains the connections. ctx bounds the wait; when it
// expires the connections are closed anyway and ctx's error is returned.
func (s *Service) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	var errs []error
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down HTTP: %w", err))
		}
	}
	if err := s.svc.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the micro service: %w", err))
	}
	// The endpoint's subscription drains asynchronously; requests still
	// buffered are handled meanwhile. apiNC holds no other subscriptions.
	if err := waitFor(ctx, func() bool { return s.apiNC.NumSubscriptions() == 0 || s.apiNC.IsClosed() }); err != nil {
		errs = append(errs, fmt.Errorf("draining the ingest endpoint: %w", err))
	}
	done := make(chan struct{})
	go func() { s.nh.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for NATS requests: %w", ctx.Err()))
	}
	s.stopGuard()
	for _, nc := range []*nats.Conn{s.apiNC, s.conNC, s.eraseNC, s.nc} {
		if nc == nil {
			continue
		}
		if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("draining NATS: %w", err))
		}
		if err := waitFor(ctx, nc.IsClosed); err != nil {
			nc.Close()
			errs = append(errs, fmt.Errorf("draining NATS: %w", err))
		}
	}
	s.log.Info("ingest stopped")
	return errors.Join(errs...)
}

// waitFor polls cond until it holds or ctx is done.
func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
