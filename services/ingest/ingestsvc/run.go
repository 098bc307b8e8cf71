package ingestsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/ops"
	"github.com/recallhq/recall/pkg/claimcheck"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/ingest/console"
)

// Run serves until ctx is done, then shuts down gracefully (see the package
// comment). A clean stop returns nil, and so does a stop while starting.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	var served error
	select {
	case <-ctx.Done():
	case err := <-s.httpErr:
		served = fmt.Errorf("serving HTTP: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	return errors.Join(served, s.Shutdown(sctx))
}

// Service is a running ingest service. Its connections, endpoints and HTTP
// edge belong to one internal/lifecycle: Shutdown stops them in its order.
type Service struct {
	cfg     Config
	log     *slog.Logger
	life    *lifecycle.Service
	nc      *nats.Conn // JetStream publishing, session API requests (the lifecycle's own)
	apiNC   *nats.Conn // the micro service: its subscriptions and replies
	conNC   *nats.Conn // bulk reads: the console's (transcripts, listings, live streams), exports, config history
	conJS   jetstream.JetStream
	eraseNC *nats.Conn // the eraser: purges, its guard's watches
	js      jetstream.JetStream
	later   *microapi.Later // the NATS ingest endpoint's answers
	in      *Ingester
	blobs   jetstream.ObjectStore // RECALL_BLOBS: claim checks, chunked requests
	ln      net.Listener
	httpErr <-chan error
	handler http.Handler
	eraser  *erase.Eraser
	prices  prices.Table // the console's (RECALL_INDEX_PRICES)
	// live is the service's own lifetime, from Start to Shutdown: derived
	// from the start's context (its values, not its end) and cancelled by
	// the lifecycle's stop. Work that outlives the start runs under it.
	live context.Context
}

// Start connects to NATS, provisions the streams, and starts the HTTP edge
// and the NATS ingest endpoint; ctx bounds the start only. It returns an
// error wrapping lifecycle.ErrStopped when ctx ended first. Stop the
// service with Shutdown.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	auth, err := NewAuth(cfg.Tenants)
	if err == nil {
		err = auth.SetOperators(cfg.OperatorTokens)
	}
	var table prices.Table
	if err == nil {
		table, err = cfg.priceTable()
	}
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if auth.Open() {
		log.WarnContext(ctx, "no tenants configured (RECALL_TENANTS is empty): serving the single tenant \"default\" WITHOUT authentication; bind the HTTP edge to localhost only", "http_addr", cfg.HTTPAddr)
	}
	// Ingest, in every deployment and the shard streams' writer, is the
	// one service that keeps the NATS leaders spread while it runs.
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: "recall-ingest", NATS: cfg.NATS, Provision: cfg.Config, KeepBalanced: true,
		JetStreamOpts: []jetstream.JetStreamOpt{jetstream.WithPublishAsyncMaxPending(cfg.MaxPending), jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout)}}, log)
	if err != nil {
		return nil, err
	}
	live, endLive := context.WithCancel(context.WithoutCancel(ctx))
	life.OnStop(endLive)
	s := &Service{cfg: cfg, log: log, life: life, nc: life.NC, js: life.JS, prices: table, live: live}
	if err := s.start(ctx, auth); err != nil {
		life.Stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", lifecycle.ErrStopped, err)
		}
		return nil, err
	}
	life.SetReady(s.streamsReady)
	log.InfoContext(ctx, "ingest started", "nats_endpoint", IngestEndpointSubject)
	return s, nil
}

// start builds the service's parts on its lifecycle; what it started is
// stopped by the lifecycle's Stop, also when it fails.
func (s *Service) start(ctx context.Context, auth *Auth) error {
	cfg := s.cfg
	limits := Limits{MaxEventBytes: cfg.MaxEventBytes, MaxBatchEvents: cfg.MaxBatchEvents, MaxBodyBytes: cfg.MaxBodyBytes,
		BodyTimeout: cfg.BodyTimeout, adm: newAdmission(cfg)}
	s.in = NewIngester(s.js, cfg.Layout(), cfg.MaxEventBytes, cfg.PublishTimeout)
	var err error
	if s.blobs, err = s.js.ObjectStore(ctx, events.BucketBlobs); err != nil {
		return fmt.Errorf("opening object store %s: %w", events.BucketBlobs, err)
	}
	// The console's reads, exports, config history pages and the records
	// of duplicates can be large: they get their own connection, so they
	// cannot get the connection that publishes events disconnected.
	if s.conNC, err = s.life.Connect("recall-ingest-console"); err != nil {
		return err
	}
	if s.conJS, err = jetstream.New(s.conNC); err != nil {
		return fmt.Errorf("opening JetStream for bulk reads: %w", err)
	}
	// Headroom for the headers ingest adds (dedup id, trace context).
	s.in.UseClaimCheck(s.blobs, claimcheck.InlineLimit(s.nc.MaxPayload(), cfg.InlineBytes), s.conNC, s.log)
	if err := s.startEraser(ctx); err != nil {
		return err
	}
	if err := s.startEndpoint(ctx, limits); err != nil {
		return err
	}
	return s.serveHTTP(ctx, auth, limits)
}

// startEndpoint starts the NATS endpoints (ingest, config, erase) on a
// connection of their own, from one endpoint table (internal/microapi):
// each admits per tenant — config and erase in the HTTP edge's lanes, so
// a tenant's NATS and HTTP requests share one bound — and answers later,
// so one tenant's queue never holds another's request. The answers are
// awaited at shutdown (for at most ShutdownGrace) once the endpoints'
// subscriptions drained, so the requests they had received are answered.
func (s *Service) startEndpoint(ctx context.Context, limits Limits) error {
	var err error
	if s.apiNC, err = s.life.Connect("recall-ingest-api"); err != nil {
		return err
	}
	// The endpoint's run ends with Shutdown, not with ctx (the start's).
	s.later = microapi.NewLater(context.WithoutCancel(ctx), s.apiNC, s.log, s.cfg.ShutdownGrace)
	s.life.Await(endpointDrained{s.apiNC}, s.later)
	nh := NewNATSHandler(s.later, s.in, limits, 1024)
	nh.tenantShare(s.cfg.TenantInFlight)
	nh.UseUploads(s.blobs, s.cfg.PublishTimeout)
	svc, err := microapi.Serve(s.later, microapi.Service{Name: ServiceName,
		Description: "Recall ingest: validates session CloudEvents and stores them on the transcript's shard streams (" + events.StreamTranscriptShardPrefix + "<shard>)",
		Endpoints: []microapi.Endpoint{
			nh.endpoint(),
			configEndpoint(s.configOps(), limits.adm),
			eraseEndpoint(s.eraser, limits.adm.lane(calls), s.in.tracer),
		}})
	if err != nil {
		return fmt.Errorf("starting the NATS ingest endpoint: %w", err)
	}
	s.life.Adopt(svc)
	// The endpoint serves once the server registered its subscription; a
	// flush that fails (still connecting) only delays that.
	if ferr := s.apiNC.FlushTimeout(startFlush); ferr != nil {
		s.log.WarnContext(ctx, "NATS ingest endpoint not confirmed yet", "err", ferr)
	}
	return nil
}

// configOps are the configuration operations of the HTTP and NATS APIs.
func (s *Service) configOps() configOps {
	return configOps{js: s.js, bulk: s.conJS, lim: s.cfg.TenantMax}
}

// endpointDrained waits, at shutdown, until the micro service's
// subscriptions on nc (its only ones) drained: requests still buffered
// are handled meanwhile, then the answers are awaited.
type endpointDrained struct{ nc *nats.Conn }

func (e endpointDrained) Stop(ctx context.Context) {
	_ = waitFor(ctx, func() bool { return e.nc.NumSubscriptions() == 0 || e.nc.IsClosed() })
}

// serveHTTP builds the HTTP edge (events, the session API, the console,
// operational endpoints) and, with an address configured, listens.
func (s *Service) serveHTTP(ctx context.Context, auth *Auth, limits Limits) error {
	cfg := s.cfg
	mux := ops.Handler(s.life.Ready)
	mux.Handle("POST /v1/events", NewEventsHandler(s.in, auth, limits))
	NewSessionAPI(s.nc, auth, cfg.APITimeout, limits).Register(mux)
	NewConfigAPI(s.js, s.conJS, s.cfg.TenantMax, auth, limits).Register(mux)
	con, err := console.New(s.conNC, cfg.Layout(), auth.Identify, console.Config{Tenants: auth.ConsoleTenants(), Timeout: cfg.APITimeout, Log: s.log,
		Prices: s.prices,
		Admit: func(w http.ResponseWriter, r *http.Request, tenant, endpoint string) (func(), bool) {
			return admit(r.Context(), w, limits.adm.lane(calls), tenant, endpoint)
		}})
	if err != nil {
		return fmt.Errorf("starting the console: %w", err)
	}
	con.Register(mux)
	if err := s.dataAPI(auth, limits).Register(mux); err != nil {
		return err
	}
	s.handler = mux
	if cfg.HTTPAddr == "" {
		return nil
	}
	return s.listen(ctx, mux, con.Close)
}

// listen serves mux on the configured address within the connection
// bounds (total, per client IP) and timeouts (headers, idle keep-alive),
// as the lifecycle's HTTP edge: stopped first at shutdown.
func (s *Service) listen(ctx context.Context, mux http.Handler, onShutdown func()) error {
	cfg := s.cfg
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	s.ln = newLimitListener(ln, cfg.MaxConns, cfg.MaxConnsPerIP)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: cfg.HeaderTimeout, IdleTimeout: cfg.IdleTimeout}
	srv.RegisterOnShutdown(onShutdown)
	s.httpErr = s.life.ServeHTTP(srv, s.ln, cfg.ShutdownGrace)
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

// streamsReady is the component's part of /readyz: the transcript's
// streams answer.
func (s *Service) streamsReady() error {
	ctx, cancel := context.WithTimeout(s.live, readyTimeout)
	defer cancel()
	for _, name := range s.cfg.Layout().Streams() {
		if _, err := s.js.Stream(ctx, name); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
	}
	return nil
}

// Shutdown stops the service in the order of docs/architecture.md#shutdown.
// ctx bounds the waits for requests (each
// also within ShutdownGrace); it returns what did not end cleanly.
func (s *Service) Shutdown(ctx context.Context) error {
	err := s.life.Shutdown(ctx)
	s.log.Info("ingest stopped")
	return err
}

// waitFor polls cond until it holds or ctx is done.
func waitFor(ctx context.Context, cond func() bool) error {
	return pollPolicy.Do(ctx, nil, "", func(context.Context) error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// pollPolicy polls a condition every few milliseconds.
var pollPolicy = retry.Policy{First: pollEvery, Max: pollEvery}

var errNotYet = errors.New("not yet")

const (
	// startFlush bounds the wait for the server to confirm the endpoint's
	// subscription at start.
	startFlush = 5 * time.Second
	// readyTimeout bounds /readyz's look at the streams.
	readyTimeout = 2 * time.Second
	// pollEvery is waitFor's interval.
	pollEvery = 5 * time.Millisecond
)
