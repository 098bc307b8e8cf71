package provision_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestConfigHistoryRaised: an existing RECALL_CONFIG provisioned with the
// old history (8) is raised to 64 in place, its values kept, and Ensure
// stays idempotent afterwards.
func TestConfigHistoryRaised(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.BucketConfig, History: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, events.ConfigKey("a"), []byte(`{"min_new_user_messages": 3}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		kv, err = js.KeyValue(ctx, events.BucketConfig)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.History() != 64 {
			t.Fatalf("history = %d, want 64", st.History())
		}
	}
	if e, err := kv.Get(ctx, events.ConfigKey("a")); err != nil || string(e.Value()) != `{"min_new_user_messages": 3}` {
		t.Fatalf("value after raising the history: %v", err)
	}
}
