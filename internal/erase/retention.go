package erase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/keylock"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// SweepConfig configures the retention sweeper (RECALL_RETENTION_*).
type SweepConfig struct {
	Interval time.Duration `envconfig:"SWEEP_INTERVAL" default:"10m" desc:"how often the retention sweeper erases the sessions and notifications older than their tenant's retention (0: never)"`
	Batch    int           `envconfig:"SWEEP_BATCH" default:"100" desc:"most sessions one tenant's sweep erases per round"`
}

// sweepLease is the RECALL_TOMBSTONES key of the sweep lease: one
// replica sweeps at a time.
const sweepLease = "lease.retention"

// Sweeper enforces tenants' retention (events.Retention): each round it
// erases, per tenant, at most Batch sessions whose newest activity is
// older than SessionMaxAge (as Session does, but without a tombstone: a
// session idle that long has nothing in flight and may resume; announced
// with reason "retention"), and purges the tenant's notifications older than
// NotificationsMaxAge. Sessions are found through the session index and
// the memory bucket (their newest write, then the transcript's newest
// record, read from the session's shard stream, confirms); a session in
// neither is capped by the shard streams' RECALL_TRANSCRIPT_MAX_AGE only.
// The stream-wide limits cap every tenant.
type Sweeper struct {
	e       *Eraser
	cfg     SweepConfig
	tenants func() map[string]events.Retention
	holder  string
}

// Sweeper returns a sweeper of the tenants' retentions, which tenants
// reports (live); holder names this replica in the sweep lease.
func (e *Eraser) Sweeper(cfg SweepConfig, holder string, tenants func() map[string]events.Retention) *Sweeper {
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	return &Sweeper{e: e, cfg: cfg, tenants: tenants, holder: holder}
}

// Run sweeps every Interval until ctx is done, in the replica that holds
// the sweep lease; a failed round is logged and retried at the next.
func (s *Sweeper) Run(ctx context.Context) {
	if s.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.round(ctx); err != nil && ctx.Err() == nil {
			s.e.log.WarnContext(ctx, "retention sweep", "err", err)
		}
	}
}

// round sweeps every tenant once if it gets the lease at once.
func (s *Sweeper) round(ctx context.Context) error {
	kv, err := s.e.js.KeyValue(ctx, events.BucketTombstones)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	release, err := keylock.Lease(lctx, kv, sweepLease, s.holder, 2*s.cfg.Interval)
	cancel()
	if err != nil {
		return nil // another replica sweeps
	}
	defer release()
	for tenant, r := range s.tenants() {
		res, err := s.Tenant(ctx, tenant, r, time.Now())
		if err != nil {
			return fmt.Errorf("tenant %s: %w", tenant, err)
		}
		if len(res.Sessions) > 0 || res.Notifications > 0 {
			s.e.log.InfoContext(ctx, "retention swept", "tenant", tenant, "sessions", len(res.Sessions), "notifications", res.Notifications)
		}
	}
	return nil
}

// SweepResult is what one tenant's sweep removed.
type SweepResult struct {
	Sessions      []events.EraseReceipt
	Notifications uint64
}

// Tenant sweeps one tenant as of now.
func (s *Sweeper) Tenant(ctx context.Context, tenant string, r events.Retention, now time.Time) (SweepResult, error) {
	var res SweepResult
	sessionAge, notifyAge, err := r.Durations()
	if err != nil || validate(tenant) != nil {
		return res, err
	}
	if sessionAge > 0 {
		ids, err := s.expired(ctx, tenant, now.Add(-sessionAge))
		if err != nil {
			return res, err
		}
		// No tombstone: nothing is in flight for a session idle that long,
		// and the session may resume (as a new one, from its next event).
		for _, id := range ids {
			r := events.EraseReceipt{Tenant: tenant, Session: id, Parts: []events.ErasedPart{}, ErasedAt: time.Now().UTC()}
			if err := s.e.finish(ctx, &r, Actor{Reason: "retention"}); err != nil {
				return res, err
			}
			res.Sessions = append(res.Sessions, r)
		}
	}
	if notifyAge > 0 {
		res.Notifications, err = s.e.purgeBefore(ctx, events.StreamEvents, events.EventsSubject("*", tenant, "*"), now.Add(-notifyAge))
	}
	return res, err
}

// expired returns at most Batch sessions of tenant last active before
// cutoff, oldest first.
func (s *Sweeper) expired(ctx context.Context, tenant string, cutoff time.Time) ([]string, error) {
	newest := map[string]time.Time{}
	seen := func(session string, at time.Time) {
		if at.After(newest[session]) {
			newest[session] = at
		} else if _, ok := newest[session]; !ok {
			newest[session] = at
		}
	}
	err := s.e.entries(ctx, events.BucketIndex, tenant+".*", func(e jetstream.KeyValueEntry) {
		var idx events.SessionIndex
		if json.Unmarshal(e.Value(), &idx) == nil && idx.Session != "" {
			seen(idx.Session, latest(idx.UpdatedAt, idx.IndexedAt, idx.CreatedAt, e.Created()))
		}
	})
	if err == nil {
		err = s.e.entries(ctx, events.BucketMemory, tenant+".*", func(e jetstream.KeyValueEntry) {
			if _, session, ok := keySession(e.Key()); ok {
				seen(session, e.Created())
			}
		})
	}
	if err != nil {
		return nil, err
	}
	var old []string
	for id, at := range newest {
		if at.Before(cutoff) && validate(id) == nil {
			old = append(old, id)
		}
	}
	sort.Slice(old, func(i, j int) bool { return newest[old[i]].Before(newest[old[j]]) })
	var out []string
	for _, id := range old {
		if len(out) == s.cfg.Batch {
			break
		}
		layout := s.e.layout
		last, err := transcript.LastOfEach(ctx, s.e.nc, layout.Stream(tenant, id), []string{layout.Subject(tenant, id)}, 0, 1)
		if err != nil {
			return nil, fmt.Errorf("reading the newest record of %s: %w", id, err)
		}
		if len(last) == 0 || last[0].Time.Before(cutoff) {
			out = append(out, id)
		}
	}
	return out, nil
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// entries calls fn with the newest entry of every key of bucket matching
// filter (see values).
func (e *Eraser) entries(ctx context.Context, bucket, filter string, fn func(jetstream.KeyValueEntry)) error {
	return e.watchInitial(ctx, bucket, filter, func(v jetstream.KeyValueEntry) error { fn(v); return nil })
}

// purgeBefore purges the messages of stream on filter stored before
// cutoff and returns how many it removed.
func (e *Eraser) purgeBefore(ctx context.Context, stream, filter string, cutoff time.Time) (uint64, error) {
	req, _ := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
		Next      string    `json:"next_by_subj"`
	}{cutoff.UTC(), filter})
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	m, err := e.nc.RequestWithContext(ctx, apiPrefix(e.js)+"DIRECT.GET."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("finding the first message after %s: %w", cutoff.Format(time.RFC3339), err)
	}
	var keepFrom uint64 // 0: nothing is newer, purge all
	switch status := m.Header.Get("Status"); status {
	case "":
		if keepFrom, err = seqOf(m); err != nil {
			return 0, err
		}
	case "404":
	default:
		return 0, fmt.Errorf("finding the first message after %s: status %s %s", cutoff.Format(time.RFC3339), status, m.Header.Get("Description"))
	}
	return e.purgeSeq(ctx, stream, filter, keepFrom)
}

func seqOf(m *nats.Msg) (uint64, error) {
	var seq uint64
	if _, err := fmt.Sscan(m.Header.Get(jetstream.SequenceHeader), &seq); err != nil || seq == 0 {
		return 0, errors.New("a direct get answer without its sequence")
	}
	return seq, nil
}
