package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/pkg/events"
)

// liveTombstones reads the tombstones of the server's
// events.BucketTombstones (none when it does not exist).
func liveTombstones(ctx context.Context, nc *nats.Conn) ([]events.Tombstone, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, events.BucketTombstones)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketTombstones, err)
	}
	wctx, cancel := context.WithTimeout(ctx, idle)
	defer cancel()
	w, err := kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", events.BucketTombstones, err)
	}
	defer func() { _ = w.Stop() }()
	out := []events.Tombstone{}
	for {
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("reading %s: %w", events.BucketTombstones, wctx.Err())
		case v := <-w.Updates():
			if v == nil {
				return out, nil
			}
			var t events.Tombstone
			if json.Unmarshal(v.Value(), &t) == nil && t.Tenant != "" && t.Session != "" {
				out = append(out, t)
			}
		}
	}
}

// ErasedFrom reads the tombstones recorded in the manifests of other
// backup directories (newer backups), for Options.ErasedFrom.
func ErasedFrom(dirs ...string) ([]events.Tombstone, error) {
	var out []events.Tombstone
	for _, d := range dirs {
		m, err := ReadManifest(d)
		if err != nil {
			return nil, err
		}
		out = append(out, m.Tombstones...)
	}
	return out, nil
}

// ReadManifest reads dir's manifest.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%w: %s has no %s (not a backup, or one that did not finish)", ErrInvalid, dir, ManifestFile)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: %s: %v", ErrInvalid, filepath.Join(dir, ManifestFile), err)
	}
	if m.Format != Format {
		return m, fmt.Errorf("%w: %s has format %d, this Recall reads format %d", ErrInvalid, filepath.Join(dir, ManifestFile), m.Format, Format)
	}
	return m, nil
}

// merge returns the tombstones of every list, one per session (the
// latest expiry), in a stable order.
func merge(lists ...[]events.Tombstone) []events.Tombstone {
	by := map[string]events.Tombstone{}
	for _, l := range lists {
		for _, t := range l {
			k := events.TombstoneKey(t.Tenant, t.Session)
			if have, ok := by[k]; !ok || t.Until.After(have.Until) {
				by[k] = t
			}
		}
	}
	out := make([]events.Tombstone, 0, len(by))
	for _, t := range by {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		return events.TombstoneKey(out[i].Tenant, out[i].Session) < events.TombstoneKey(out[j].Tenant, out[j].Session)
	})
	return out
}

// reapply erases every tombstone's session on the restored server.
func reapply(ctx context.Context, nc *nats.Conn, shards int, ts []events.Tombstone, log *slog.Logger) ([]events.EraseReceipt, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	e := erase.New(js, events.NewLayout(shards), erase.Config{Drain: -1}, nil, log)
	out := make([]events.EraseReceipt, 0, len(ts))
	for _, t := range ts {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		r, err := e.Reapply(rctx, t, erase.Actor{Operator: true, Reason: "restore"})
		cancel()
		if err != nil {
			return out, fmt.Errorf("erasing %s/%s again: %w", t.Tenant, t.Session, err)
		}
		out = append(out, r)
	}
	return out, nil
}
