package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// membershipBuckets hold the services' heartbeats (per-key TTLs): a live
// key is a running replica.
var membershipBuckets = []string{events.BucketWorkers, events.BucketTriggers, events.BucketLTMMembers,
	events.BucketIndexMembers, events.BucketLTMFollowers}

// idlePoll is checkIdle's poll: the signs of running services looked for
// every second.
var idlePoll = retry.Policy{First: time.Second, Max: time.Second}

// errBusy: a service still runs.
var errBusy = errors.New("services still running")

// checkIdle waits up to IdleWait for every sign of a running service to
// go, and fails with ErrServicesRunning listing what it saw. Force skips
// it.
func (m *Migrator) checkIdle(ctx context.Context) error {
	if m.cfg.Force {
		m.log.Warn("not checking that the services are stopped (--force)")
		return nil
	}
	deadline := time.Now().Add(m.cfg.IdleWait)
	return idlePoll.Do(ctx, nil, "", func(ctx context.Context) error {
		busy, err := m.activity(ctx)
		if err != nil {
			return retry.Permanent(err)
		}
		if len(busy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return retry.Permanent(fmt.Errorf("%w: %s; stop every Recall service (ingest, trigger, extractor, compactor, indexer, longterm) and other readers of the transcript, then run the migration again (pass --force only if you are sure nothing runs)",
				ErrServicesRunning, strings.Join(busy, "; ")))
		}
		m.log.Info("waiting for the services to go idle", "seen", strings.Join(busy, "; "))
		return errBusy
	})
}

// activity lists the signs of running services: consumers with waiting
// pull requests or a pinned client, live membership heartbeats, and
// Recall micro services answering a ping.
func (m *Migrator) activity(ctx context.Context) ([]string, error) {
	streams := append([]string{provision.StreamLegacyTranscript, events.StreamExtract, events.StreamCommits}, m.layout.Streams()...)
	var busy []string
	for _, name := range streams {
		seen, err := m.consumerActivity(ctx, name)
		if err != nil {
			return nil, err
		}
		busy = append(busy, seen...)
	}
	for _, b := range membershipBuckets {
		kv, err := m.js.KeyValue(ctx, b)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", b, err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", b, err)
		}
		for k := range keys.Keys() {
			busy = append(busy, fmt.Sprintf("a heartbeat in %s (%s)", b, k))
		}
	}
	return append(busy, pingServices(ctx, m.js.Conn())...), nil
}

// consumerActivity lists stream's consumers that have waiting pull
// requests or a pinned client.
func (m *Migrator) consumerActivity(ctx context.Context, stream string) ([]string, error) {
	s, err := m.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	var busy []string
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		if info.NumWaiting > 0 {
			busy = append(busy, fmt.Sprintf("consumer %s on %s has %d pull requests waiting", info.Name, stream, info.NumWaiting))
		}
		for _, g := range info.PriorityGroups {
			if g.PinnedClientID != "" {
				busy = append(busy, fmt.Sprintf("consumer %s on %s has a pinned client (group %s)", info.Name, stream, g.Group))
			}
		}
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of %s: %w", stream, err)
	}
	return busy, nil
}

// pingServices asks every micro service to answer ($SRV.PING) and lists
// Recall's that did within 300 ms. A server that does not let this user
// ping yields nothing.
func pingServices(ctx context.Context, nc *nats.Conn) []string {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		return nil
	}
	var busy []string
	t := time.NewTimer(300 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case msg := <-ch:
			var p struct {
				Name string `json:"name"`
				ID   string `json:"id"`
			}
			if json.Unmarshal(msg.Data, &p) == nil && strings.HasPrefix(p.Name, "recall-") {
				busy = append(busy, fmt.Sprintf("service %s (%s) answers", p.Name, p.ID))
			}
		case <-t.C:
			return busy
		case <-ctx.Done():
			return busy
		}
	}
}
