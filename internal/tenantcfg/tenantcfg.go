// Package tenantcfg keeps every tenant's live configuration from the
// RECALL_CONFIG bucket in memory. It watches the bucket (no polling), so a
// change applies to running services within a round trip, without a restart.
//
// It also holds the configuration API's logic, shared by the HTTP and NATS
// endpoints (services/ingest) and `recall tenant`: the one validator
// (Parse, Validate), compare-and-set writes that record who wrote a
// revision and when (Write, Patch), and the revision history with a
// field-level diff (History). The JSON Schema of docs/ is Schema's output.
package tenantcfg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Store is a live, concurrency-safe view of all tenant configurations.
type Store struct {
	mu      sync.RWMutex
	tenants map[string]events.TenantConfig
	rev     uint64
	changed chan struct{}
	log     *slog.Logger
}

// Watch loads the bucket and keeps the store current until ctx is done. It
// returns once the initial values are loaded. Opening the bucket, starting
// the watch and loading the initial values are retried with provision.Startup
// (each attempt bounded to provision.AttemptTimeout) until they succeed, so
// a node that is down or returning delays the start instead of failing it;
// the only error is ctx.Err(). Values are read with Decode (the bare
// configuration or one written by Write); invalid ones are logged and
// ignored (the previous valid value stays).
func Watch(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Store, error) {
	var s *Store
	var w jetstream.KeyWatcher
	var stopWatch context.CancelFunc
	err := provision.Startup.Do(ctx, log, "watching "+events.BucketConfig, func(actx context.Context) error {
		// The watch lives as long as ctx (nats.go ends it with the context
		// it was created with), but an attempt that outlasts actx fails.
		wctx, wcancel := context.WithCancel(ctx)
		expire := context.AfterFunc(actx, wcancel)
		st, wt, err := load(actx, wctx, js, log)
		if !expire() && err == nil {
			err = fmt.Errorf("loading %s: %w", events.BucketConfig, actx.Err())
		}
		if err != nil {
			wcancel()
			return err
		}
		s, w, stopWatch = st, wt, wcancel
		return nil
	})
	if err != nil {
		return nil, err
	}
	go func() {
		defer stopWatch()
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					s.apply(e)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return s, nil
}

// load is one attempt of Watch: open the bucket, start the watch (which
// lives until wctx ends) and apply the initial values, within ctx. The
// watcher is stopped on error.
func load(ctx, wctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Store, jetstream.KeyWatcher, error) {
	kv, err := js.KeyValue(ctx, events.BucketConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", events.BucketConfig, err)
	}
	w, err := kv.Watch(wctx, "tenant.*")
	if err != nil {
		return nil, nil, fmt.Errorf("watching %s: %w", events.BucketConfig, err)
	}
	s := &Store{tenants: map[string]events.TenantConfig{}, changed: make(chan struct{}), log: log}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, errors.New("config watcher closed")
			}
			if e == nil {
				return s, w, nil
			}
			s.apply(e)
		case <-ctx.Done():
			_ = w.Stop()
			return nil, nil, fmt.Errorf("loading %s: %w", events.BucketConfig, ctx.Err())
		}
	}
}

func (s *Store) apply(e jetstream.KeyValueEntry) {
	tenant := strings.TrimPrefix(e.Key(), "tenant.")
	s.mu.Lock()
	defer func() {
		s.rev = e.Revision()
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}()
	if e.Operation() != jetstream.KeyValuePut {
		delete(s.tenants, tenant)
		return
	}
	c, _, err := Decode(e.Value())
	if err != nil {
		if s.log != nil {
			s.log.Warn("ignoring invalid tenant config", "tenant", tenant, "revision", e.Revision(), "err", err)
		}
		return
	}
	s.tenants[tenant] = c
}

// Get returns tenant's configuration (zero value when none is stored).
func (s *Store) Get(tenant string) events.TenantConfig {
	if s == nil {
		return events.TenantConfig{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tenants[tenant]
}

// Revision is the bucket revision last applied; Changed is closed at the
// next change. Tests use them to wait for a change to land.
func (s *Store) Revision() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// Changed returns a channel closed when the next change is applied.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// Put validates c and stores it as tenant's configuration, unconditionally
// and attributed to the operator (tests, the bench and Go programs that
// hold a JetStream handle; tenants and operators use the API: GET, PUT and
// PATCH /v1/config, `recall tenant`). See Write.
func Put(ctx context.Context, js jetstream.JetStream, tenant string, c events.TenantConfig) (uint64, error) {
	if err := events.ValidateID(tenant); err != nil {
		return 0, err
	}
	kv, err := js.KeyValue(ctx, events.BucketConfig)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", events.BucketConfig, err)
	}
	return Write(ctx, kv, tenant, c, events.ConfigMeta{Actor: events.ConfigActorOperator}, Precondition{})
}

// CheckMemory checks a configuration's long-term memory part: its custom
// memory types, and its default policy against the registry they make.
func CheckMemory(c events.TenantConfig) error {
	reg, err := memory.NewRegistry(c.CustomMemoryTypes)
	if err != nil {
		return err
	}
	return reg.CheckPolicy(c.MemoryPolicy)
}

// Bool resolves an optional gate: def when unset.
func Bool(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
