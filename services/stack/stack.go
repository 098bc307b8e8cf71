package stack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// Options configures an in-process Recall: every service plus, unless
// NATSURL is set, an embedded NATS server.
type Options struct {
	DataDir    string // embedded JetStream store
	NATSListen string // embedded server client address ("" = random loopback port)
	NATSURL    string // external NATS instead of the embedded one
	HTTPAddr   string // ingest HTTP edge
	// GatewayAddr is the model gateway's listen address ("" = no gateway).
	GatewayAddr string
	Log         *slog.Logger
	// Provider, when set, is the LLM provider of the extractor and of the
	// compactor's fallback instead of the one RECALL_LLM_* configure.
	Provider llm.Provider
}

// Stack is a running in-process Recall.
type Stack struct {
	NATSURL     string
	HTTPAddr    string
	GatewayAddr string // "" when the stack runs no gateway
	// Auth is the embedded server's authentication, nil when it serves
	// without (no tenants configured, loopback only).
	Auth   *Auth
	srv    *server.Server
	unlock func() // releases the data directory's lock (nil: none taken)
	cancel context.CancelFunc
	log    *slog.Logger
	pause  time.Duration // first restart pause (default 1s)
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
	done   chan struct{}
}

// stackConfig is every service's configuration, from RECALL_* variables.
type stackConfig struct {
	prov      provision.Config
	ingest    ingestsvc.Config
	trigger   triggersvc.Config
	extractor extractorsvc.Config
	compactor compactorsvc.Config
	indexer   indexersvc.Config
	longterm  longtermsvc.Config
	gateway   gatewaysvc.Config
}

func loadStackConfig() (stackConfig, error) {
	var c stackConfig
	for _, v := range []any{&c.prov, &c.ingest, &c.trigger, &c.extractor, &c.compactor, &c.indexer, &c.longterm, &c.gateway} {
		if err := envconfig.Process(svcmain.EnvPrefix, v); err != nil {
			return c, fmt.Errorf("configuration: %w", err)
		}
	}
	return c, nil
}

// Start starts NATS (unless external), provisions, and runs every
// service in this process. Services read the rest of their configuration
// from RECALL_* environment variables, as they would alone.
//
// With tenants (RECALL_TENANTS) the embedded server authenticates: every
// service connects as its generated user and each tenant has its own (see
// Auth; the credentials are in the data directory). Without tenants it
// serves without authentication, and only on a loopback address.
func Start(ctx context.Context, o Options) (*Stack, error) {
	s := &Stack{NATSURL: o.NATSURL, HTTPAddr: o.HTTPAddr, log: o.Log, done: make(chan struct{})}
	cfg, err := loadStackConfig()
	if err != nil {
		return nil, err
	}
	if o.HTTPAddr != "" {
		if s.HTTPAddr, err = freeAddr(o.HTTPAddr, "HTTP edge", "--http or RECALL_HTTP_ADDR"); err != nil {
			return nil, err
		}
	}
	if o.GatewayAddr != "" {
		if s.GatewayAddr, err = freeAddr(o.GatewayAddr, "model gateway", "--gateway or RECALL_GATEWAY_ADDR"); err != nil {
			return nil, err
		}
	}
	if s.NATSURL == "" {
		if err := s.startServer(o, cfg.ingest.Tenants); err != nil {
			s.shutdownServer()
			return nil, err
		}
	}
	if err := s.provision(ctx, cfg.prov); err != nil {
		s.shutdownServer()
		return nil, err
	}
	sctx, cancelAll := context.WithCancel(ctx)
	s.cancel = cancelAll
	natsCfg := func(user string) natsconn.Config {
		var c natsconn.Config
		_ = envconfig.Process(svcmain.EnvPrefix+"_NATS", &c)
		c.URL = s.NATSURL
		return s.Auth.Conn(c, user)
	}
	ic, tc, ec, cc, xc := cfg.ingest, cfg.trigger, cfg.extractor, cfg.compactor, cfg.indexer
	ic.NATS, tc.NATS = natsCfg("recall-ingest"), natsCfg("recall-trigger")
	ec.NATS, cc.NATS = natsCfg("recall-extractor"), natsCfg("recall-compactor")
	xc.NATS = natsCfg("recall-indexer")
	lc := cfg.longterm
	lc.NATS = natsCfg("recall-longterm")
	ic.HTTPAddr = s.HTTPAddr
	if o.Provider != nil {
		ec.Provider, cc.Provider, xc.Provider, lc.Provider = o.Provider, o.Provider, o.Provider, o.Provider
	}
	s.goRun(sctx, "ingest", func(ctx context.Context) error { return ingestsvc.Run(ctx, ic, o.Log.With("service", "ingest")) })
	s.goRun(sctx, "trigger", func(ctx context.Context) error { return triggersvc.Run(ctx, tc, o.Log.With("service", "trigger")) })
	s.goRun(sctx, "extractor", func(ctx context.Context) error { return extractorsvc.Run(ctx, ec, o.Log.With("service", "extractor")) })
	s.goRun(sctx, "compactor", func(ctx context.Context) error { return compactorsvc.Run(ctx, cc, o.Log.With("service", "compactor")) })
	s.goRun(sctx, "indexer", func(ctx context.Context) error { return indexersvc.Run(ctx, xc, o.Log.With("service", "indexer")) })
	s.goRun(sctx, "longterm", func(ctx context.Context) error { return longtermsvc.Run(ctx, lc, o.Log.With("service", "longterm")) })
	if s.GatewayAddr != "" {
		gc := cfg.gateway
		gc.NATS, gc.Addr = natsCfg("recall-gateway"), s.GatewayAddr
		s.goRun(sctx, "gateway", func(ctx context.Context) error { return gatewaysvc.Run(ctx, gc, o.Log.With("service", "gateway")) })
	}
	go func() { s.wg.Wait(); close(s.done) }()
	if err := s.waitHTTP(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.waitServices(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.waitReaders(ctx, cfg.prov.Layout()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// apiServices are the micro services the stack runs: the stack is up when
// every one answers discovery, so a client's first request finds its
// responder.
var apiServices = []string{ingestsvc.ServiceName, triggersvc.ServiceName, extractorsvc.ServiceName,
	compactorsvc.ServiceName, indexersvc.ServiceName, longtermsvc.ServiceName}

// waitServices waits until every API service answers a discovery ping, or
// a service failed.
func (s *Stack) waitServices(ctx context.Context) error {
	nc, err := nats.Connect(s.NATSURL, s.AdminOptions()...)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", s.NATSURL, err)
	}
	defer nc.Close()
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range apiServices {
		for {
			if _, err := nc.Request("$SRV.PING."+name, nil, 250*time.Millisecond); err == nil {
				break
			}
			select {
			case <-s.done:
				return s.Err()
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the %s service did not come up within 60s", name)
			}
			if !retry.Pause(ctx.Done(), pollEvery) {
				return ctx.Err()
			}
		}
	}
	return nil
}

// startServer locks the data directory and starts the embedded server:
// authenticated when tenantSpec names tenants, otherwise open and only on
// a loopback address. A listen port 0 is a free port (NATSURL names it).
func (s *Stack) startServer(o Options, tenantSpec string) error {
	auth, err := ingestsvc.NewAuth(tenantSpec)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	tenants := auth.Tenants()
	if len(tenants) == 0 {
		if err := checkOpenListen(o.NATSListen); err != nil {
			return err
		}
	}
	if o.DataDir != "" {
		if s.unlock, err = lockDataDir(o.DataDir); err != nil {
			return err
		}
	}
	listen := o.NATSListen
	if listen != "" {
		if listen, err = freeAddr(listen, "embedded NATS server", "--nats-listen"); err != nil {
			return err
		}
	}
	var users []*server.User
	if len(tenants) > 0 {
		if s.Auth, err = loadOrCreateAuth(o.DataDir, tenants); err != nil {
			return err
		}
		if users, err = s.Auth.serverUsers(); err != nil {
			return err
		}
	}
	srv, err := embedded.Start(embedded.Options{DataDir: o.DataDir, Listen: listen, Users: users})
	if err != nil {
		return err
	}
	s.srv, s.NATSURL = srv, srv.ClientURL()
	return nil
}

// AdminOptions are the connection options of the stack's admin (none when
// the server runs without authentication).
func (s *Stack) AdminOptions() []nats.Option {
	if c := s.Auth.Conn(natsconn.Config{}, AdminUser); c.User != "" {
		return []nats.Option{nats.UserInfo(c.User, c.Password)}
	}
	return nil
}

// provision creates or updates the streams and buckets, as the admin.
func (s *Stack) provision(ctx context.Context, pc provision.Config) error {
	nc, err := nats.Connect(s.NATSURL, s.AdminOptions()...)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", s.NATSURL, err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := s.migrateLegacy(ctx, nc, pc); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := provision.Ensure(pctx, js, pc); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	return nil
}

// pollEvery is the interval of the start-up waits.
const pollEvery = 50 * time.Millisecond

// maxQuickFailures is how many times in a row a service may fail soon after
// starting before the stack gives up on it.
const maxQuickFailures = 5

// maxRestartPause caps the pause before a failed service restarts.
const maxRestartPause = 30 * time.Second

// goRun runs a service under supervision, as a process supervisor would: a
// service that returns an error is restarted after a growing pause
// (pkg/retry: the stack's first pause, default 1s, doubling up to
// 30s; a service that ran for over a minute starts again from the first)
// — a trigger halts on purpose when it cannot rebuild a session, a NATS
// outage can stop any service. A service that keeps failing within seconds
// of starting stops the whole stack with its error.
func (s *Stack) goRun(ctx context.Context, name string, run func(context.Context) error) {
	first := s.pause
	if first <= 0 {
		first = time.Second
	}
	backoff := retry.Policy{First: first, Max: maxRestartPause}.Backoff()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		quick := 0
		for {
			started := time.Now()
			err := run(ctx)
			if err == nil || ctx.Err() != nil {
				return
			}
			if time.Since(started) > time.Minute {
				quick = 0
				backoff.Reset()
			}
			if quick++; quick >= maxQuickFailures {
				s.fail(fmt.Errorf("%s failed %d times in a row: %w", name, quick, err))
				return
			}
			pause := backoff.Next()
			s.log.Error("service stopped with an error; restarting it", "service", name, "err", err, "in", pause)
			if !retry.Pause(ctx.Done(), pause) {
				return
			}
		}
	}()
}

// fail records the stack's first error and stops the stack.
func (s *Stack) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.cancel()
}

// waitHTTP waits until the HTTP edge answers /healthz or a service failed.
func (s *Stack) waitHTTP(ctx context.Context) error {
	if err := s.waitHealthz(ctx, s.HTTPAddr, "the HTTP edge"); err != nil {
		return err
	}
	return s.waitHealthz(ctx, s.GatewayAddr, "the model gateway")
}

// waitHealthz waits until addr answers /healthz ("" = nothing to wait
// for) or a service failed.
func (s *Stack) waitHealthz(ctx context.Context, addr, what string) error {
	if addr == "" {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return s.Err()
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !retry.Pause(ctx.Done(), pollEvery) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s did not come up within 30s", what)
}

// Done is closed when every service has returned.
func (s *Stack) Done() <-chan struct{} { return s.done }

// Err is the first service error, if any.
func (s *Stack) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Close stops the services (they drain), then the embedded server.
func (s *Stack) Close() error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.shutdownServer()
	return s.Err()
}

// shutdownServer stops the embedded server, then releases the data
// directory.
func (s *Stack) shutdownServer() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
}
