package tenantcfg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

func TestWatchAppliesChangesLive(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Put(ctx, js, "a", events.TenantConfig{MinimumTokensBetweenUpdate: 1234}); err != nil {
		t.Fatal(err)
	}
	st, err := Watch(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Get("a").MinimumTokensBetweenUpdate; got != 1234 {
		t.Fatalf("initial value = %d", got)
	}
	off := false
	changed := st.Changed()
	rev, err := Put(ctx, js, "a", events.TenantConfig{MinimumTokensBetweenUpdate: 99, SessionMemory: &off})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for st.Revision() < rev {
		select {
		case <-changed:
			changed = st.Changed()
		case <-deadline:
			t.Fatal("change not applied")
		}
	}
	c := st.Get("a")
	if c.MinimumTokensBetweenUpdate != 99 || Bool(c.SessionMemory, true) {
		t.Fatalf("live value = %+v", c)
	}
	// An invalid document keeps the last valid value.
	kv, _ := js.KeyValue(ctx, events.BucketConfig)
	rev, _ = kv.Put(ctx, events.ConfigKey("a"), []byte(`{"bogus": 1}`))
	for st.Revision() < rev {
		select {
		case <-st.Changed():
		case <-time.After(5 * time.Second):
			t.Fatal("invalid change not seen")
		}
	}
	if st.Get("a").MinimumTokensBetweenUpdate != 99 {
		t.Fatal("invalid document replaced the valid one")
	}
}

// TestWatchWaitsForTheBucket: Watch started before RECALL_CONFIG exists (a
// node holding it is down, or provisioning has not run) keeps retrying and
// returns once the bucket appears; stopped first, it returns ctx.Err().
func TestWatchWaitsForTheBucket(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	if _, err := Watch(sctx, js, nil); err != context.DeadlineExceeded {
		t.Fatalf("stopped before the bucket exists: %v", err)
	}

	type result struct {
		st  *Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := Watch(ctx, js, nil)
		done <- result{st, err}
	}()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Put(ctx, js, "a", events.TenantConfig{MinimumTokensBetweenUpdate: 42}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	deadline := time.After(5 * time.Second)
	for {
		changed := r.st.Changed()
		if r.st.Get("a").MinimumTokensBetweenUpdate == 42 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("value stored after the watch started not applied")
		}
	}
}

func TestCheckMemory(t *testing.T) {
	ok := events.TenantConfig{CustomMemoryTypes: []events.CustomMemoryType{{Name: "recipes", Prompt: "Recipes."}},
		MemoryPolicy: &events.MemoryPolicy{MemoryTypes: []string{"recipes", "profile"}}}
	if err := CheckMemory(ok); err != nil {
		t.Fatal(err)
	}
	bad := events.TenantConfig{MemoryPolicy: &events.MemoryPolicy{MemoryTypes: []string{"recipes"}}}
	if err := CheckMemory(bad); err == nil || !strings.Contains(err.Error(), "known: profile") {
		t.Fatalf("unknown type: %v", err)
	}
}
