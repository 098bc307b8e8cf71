package indexersvc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// countingKV counts the KV operations made through it.
type countingKV struct {
	jetstream.KeyValue
	ops atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.ops.Add(1)
	return c.KeyValue.Get(ctx, key)
}

func (c *countingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	c.ops.Add(1)
	return c.KeyValue.Create(ctx, key, value, opts...)
}

func (c *countingKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	c.ops.Add(1)
	return c.KeyValue.Update(ctx, key, value, rev)
}

func (c *countingKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	c.ops.Add(1)
	return c.KeyValue.Put(ctx, key, value)
}

func (c *countingKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	c.ops.Add(1)
	return c.KeyValue.Delete(ctx, key, opts...)
}

// TestCollidingNameClaimsAreBounded: 600 sessions of one tenant whose
// names all slug to "fix-login" (8 claiming at once) each get a distinct
// name in at most six KV operations — the first the bare slug — and a
// session claiming again gets the name it holds, as cheaply.
func TestCollidingNameClaimsAreBounded(t *testing.T) {
	_, _, js, _ := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const sessions, maxOps = 600, 6
	claim := func(session string) (string, int64) {
		c := &countingKV{KeyValue: kv}
		name, err := (&entries{kv: c, log: log}).claimName(ctx, "acme", session, "fix-login")
		if err != nil {
			t.Errorf("%s: %v", session, err)
		}
		return name, c.ops.Load()
	}
	if name, _ := claim("s0"); name != "fix-login" {
		t.Fatalf("the first claimant got %q, want the bare slug", name)
	}
	names := make([]string, sessions)
	ops := make([]int64, sessions)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i < sessions; i = int(next.Add(1)) {
				names[i], ops[i] = claim(fmt.Sprintf("s%d", i))
			}
		}()
	}
	wg.Wait()
	names[0] = "fix-login"
	seen := map[string]string{}
	var total, most int64
	for i, n := range names {
		if prev, dup := seen[n]; dup || n == "" {
			t.Fatalf("s%d got %q, held by %s", i, n, prev)
		}
		seen[n] = fmt.Sprintf("s%d", i)
		total, most = total+ops[i], max(most, ops[i])
	}
	t.Logf("%d colliding claims: %d KV operations, at most %d for one", sessions-1, total, most)
	if most > maxOps {
		t.Fatalf("a claim took %d KV operations, want at most %d", most, maxOps)
	}
	for _, i := range []int{1, 300, sessions - 1} {
		again, n := claim(fmt.Sprintf("s%d", i))
		if again != names[i] || n > maxOps {
			t.Fatalf("s%d claiming again got %q (held %q) in %d operations", i, again, names[i], n)
		}
	}
}
