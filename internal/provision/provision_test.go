package provision_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

func TestEnsureConcurrentAndIdempotent(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	cfg := provision.Config{Partitions: 4}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, js := s.Connect(t)
			errs <- provision.Ensure(ctx, js, cfg)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Ensure: %v", err)
		}
	}
	if err := provision.Ensure(ctx, js, cfg); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	for _, name := range append(cfg.Layout().Streams(), events.StreamExtract, events.StreamEvents) {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	for _, b := range []string{events.BucketMemory, events.BucketStatus, events.BucketConfig, events.BucketWorkers, events.BucketParked} {
		if _, err := js.KeyValue(ctx, b); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}
}

func TestPartitionTransform(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.ExtractSubject("t1", "s1"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(ctx, events.StreamExtract)
	msg, err := st.GetLastMsgForSubject(ctx, events.SubjectExtractPartitioned+".*.t1.s1")
	if err != nil {
		t.Fatalf("stored message not found under the partitioned subject: %v", err)
	}
	if !strings.HasPrefix(msg.Subject, events.SubjectExtractPartitioned+".") {
		t.Fatalf("subject %q", msg.Subject)
	}
	// A consumer can filter on one partition.
	p := strings.Split(msg.Subject, ".")[2]
	c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "probe", FilterSubject: events.SubjectExtractPartitioned + "." + p + ".>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 1 {
		t.Fatalf("fetched %d messages from partition %s, want 1", n, p)
	}
}

func TestIncompatiblePartitionCount(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	err := provision.Ensure(ctx, js, provision.Config{Partitions: 8})
	if !errors.Is(err, provision.ErrIncompatible) {
		t.Fatalf("err = %v, want ErrIncompatible", err)
	}
	if !strings.Contains(err.Error(), "RECALL_PARTITIONS=4") {
		t.Fatalf("error does not say what to do: %v", err)
	}
}

func TestCompatibleChangeIsApplied(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := provision.Ensure(ctx, js, provision.Config{TranscriptMaxAge: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, name := range (provision.Config{}).Layout().Streams() {
		st, _ := js.Stream(ctx, name)
		if got := st.CachedInfo().Config.MaxAge; got != 48*time.Hour {
			t.Fatalf("%s: MaxAge = %v", name, got)
		}
	}
}

func TestEnsureRetryWaitsForNATS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- provision.EnsureRetry(ctx, js, provision.Config{Partitions: 2}, nil) }()
	select {
	case err := <-done:
		t.Fatalf("EnsureRetry returned before NATS was up: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	natstest.StartWith(t, &server.Options{Port: port})
	if err := <-done; err != nil {
		t.Fatalf("EnsureRetry: %v", err)
	}
	if _, err := js.Stream(ctx, events.TranscriptShardStream(0)); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureRetryStopsOnIncompatible(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	if err := provision.EnsureRetry(ctx, js, provision.Config{Partitions: 2}, nil); !errors.Is(err, provision.ErrIncompatible) {
		t.Fatalf("err = %v, want ErrIncompatible at once", err)
	}
}
