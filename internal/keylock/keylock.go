// Package keylock serializes work per key: Locks within a process, Lease
// across replicas (a KV key created with a per-key TTL, so a crashed
// holder's lease expires).
package keylock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/retry"
)

// Locks is one lock per key, taken with a context. The zero value is ready.
type Locks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// Lock takes key's lock, waiting until ctx ends; unlock releases it.
func (k *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		k.mu.Lock()
		if k.m == nil {
			k.m = map[string]chan struct{}{}
		}
		held, busy := k.m[key]
		if !busy {
			ch := make(chan struct{})
			k.m[key] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.m, key)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Lease takes key in kv (a bucket with per-key TTLs) for holder, waiting
// (polling every 100 ms) while another holds it, until ctx ends. release
// deletes it; a holder that dies leaves it to expire after ttl.
func Lease(ctx context.Context, kv jetstream.KeyValue, key, holder string, ttl time.Duration) (release func(), err error) {
	var rev uint64
	err = leasePoll.Do(ctx, nil, "", func(ctx context.Context) error {
		var err error
		rev, err = kv.Create(ctx, key, []byte(holder), jetstream.KeyTTL(ttl))
		if err != nil && !store.IsConflict(err) {
			return retry.Permanent(fmt.Errorf("taking the lease %s: %w", key, err))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = kv.Delete(rctx, key, jetstream.LastRevision(rev))
	}, nil
}

// leasePoll asks for a held lease again every 100 ms.
var leasePoll = retry.Policy{First: 100 * time.Millisecond, Max: 100 * time.Millisecond}
