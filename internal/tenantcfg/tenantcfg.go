// Package tenantcfg keeps every tenant's live configuration from the
// RECALL_CONFIG bucket in memory. It watches the bucket (no polling), so a
// change applies to running services within a round trip, without a restart.
package tenantcfg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
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
// returns once the initial values are loaded. Invalid documents are logged
// and ignored (the previous valid value stays).
func Watch(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Store, error) {
	kv, err := js.KeyValue(ctx, events.BucketConfig)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketConfig, err)
	}
	w, err := kv.Watch(ctx, "tenant.*")
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", events.BucketConfig, err)
	}
	s := &Store{tenants: map[string]events.TenantConfig{}, changed: make(chan struct{}), log: log}
	initial := true
	for initial {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("config watcher closed")
			}
			if e == nil {
				initial = false
				continue
			}
			s.apply(e)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	go func() {
		defer w.Stop()
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
	c, err := events.DecodeTenantConfig(e.Value())
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

// Put stores tenant's configuration (used by `recall tenant` and tests).
func Put(ctx context.Context, js jetstream.JetStream, tenant string, c events.TenantConfig) (uint64, error) {
	if err := events.ValidateID(tenant); err != nil {
		return 0, err
	}
	kv, err := js.KeyValue(ctx, events.BucketConfig)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", events.BucketConfig, err)
	}
	b, _ := json.Marshal(c)
	return kv.Put(ctx, events.ConfigKey(tenant), b)
}

// Bool resolves an optional gate: def when unset.
func Bool(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
