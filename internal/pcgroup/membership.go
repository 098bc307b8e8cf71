package pcgroup

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/retry"
)

// memberInfo is the value of a membership key.
type memberInfo struct {
	Member     string    `json:"member"`
	Since      time.Time `json:"since"`
	Partitions int       `json:"partitions"`
}

// Rejoin is how a replica whose Run could not join tries again: every
// second, until its context ends (Rejoin.Do around Run).
var Rejoin = retry.Policy{First: time.Second, Max: time.Second}

// Run joins the group and serves until ctx is done. Then it stops fetching,
// lets in-flight handlers finish for up to DrainTimeout, unpins its
// consumers and deletes its membership key, so the others take over at once;
// a clean stop returns nil. Run returns an error only when it cannot join.
func (g *Group) Run(ctx context.Context) error {
	kv, err := g.js.KeyValue(ctx, g.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("opening membership bucket %s: %w", g.cfg.Bucket, err)
	}
	streams := make([]jetstream.Stream, g.cfg.Partitions)
	for p := range streams {
		name := g.cfg.StreamOf(p)
		if p > 0 && name == g.cfg.StreamOf(p-1) {
			streams[p] = streams[p-1]
			continue
		}
		if streams[p], err = g.js.Stream(ctx, name); err != nil {
			return fmt.Errorf("opening stream %s: %w", name, err)
		}
	}
	info, _ := json.Marshal(memberInfo{Member: g.cfg.Member, Since: time.Now().UTC(), Partitions: g.cfg.Partitions})
	m := &membership{g: g, ctx: ctx, kv: kv, streams: streams, info: info,
		members: map[string]bool{}, runners: map[int]*runner{}, runnerDone: make(chan *runner, g.cfg.Partitions),
		settled: g.cfg.Settle <= 0}
	if err := m.beat(); err != nil {
		return fmt.Errorf("joining group as %s: %w", g.cfg.Member, err)
	}
	m.lastBeat = time.Now()
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watching membership: %w", err)
	}
	defer func() { _ = m.w.Stop() }()
	m.w = w
	g.log.InfoContext(ctx, "joined consumer group", "member", g.cfg.Member, "partitions", g.cfg.Partitions, "heartbeat_ttl", g.cfg.HeartbeatTTL)
	var cancel context.CancelFunc
	m.hctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	m.stopSharing = g.startSharing(m.hctx)
	m.loop()
	m.leave()
	return nil
}

// membership is one Run of a member: the live members it sees, the
// partitions it runs, its heartbeats. Only Run's goroutine uses it.
type membership struct {
	g          *Group
	ctx, hctx  context.Context // Run's; the handlers' (outlives ctx for the drain)
	kv         jetstream.KeyValue
	streams    []jetstream.Stream // by partition
	info       []byte
	w          jetstream.KeyWatcher
	members    map[string]bool
	runners    map[int]*runner
	runnerDone chan *runner
	synced     bool // the watcher delivered the initial values
	settled    bool // Config.Settle has passed
	lastBeat   time.Time
	// stopSharing ends work sharing (startSharing), waiting for the loans.
	stopSharing func()
}

// beat renews the membership key (a put with a TTL).
func (m *membership) beat() error {
	bctx, cancel := context.WithTimeout(m.ctx, m.g.cfg.HeartbeatTTL/2)
	defer cancel()
	_, err := store.PutTTL(bctx, m.g.js, m.g.cfg.Bucket, m.g.cfg.Member, m.info, m.g.cfg.HeartbeatTTL, 0)
	return err
}

// loop follows membership changes, heartbeats and finished runners until
// Run's context ends, reconciling the partitions after each.
func (m *membership) loop() {
	g := m.g
	var settle <-chan time.Time
	if !m.settled {
		settle = time.After(g.cfg.Settle)
	}
	hb := time.NewTicker(g.cfg.HeartbeatTTL / 3)
	defer hb.Stop()
	updates := m.w.Updates()
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				if m.ctx.Err() != nil {
					return
				}
				updates = nil // the watcher ended (connection closed): re-watched on the next heartbeat tick
				continue
			}
			m.observe(e)
		case <-hb.C:
			updates = m.heartbeat(updates)
		case <-settle:
			m.settled, settle = true, nil
		case r := <-m.runnerDone:
			if m.runners[r.p] == r {
				delete(m.runners, r.p)
			}
		case <-m.ctx.Done():
			return
		}
		m.reconcile()
	}
}

// observe applies one membership update (nil: the initial values are in).
func (m *membership) observe(e jetstream.KeyValueEntry) {
	switch {
	case e == nil:
		m.synced = true
	case e.Operation() == jetstream.KeyValuePut:
		m.members[e.Key()] = true
	default:
		delete(m.members, e.Key())
	}
}

// heartbeat renews the membership and, when the watcher had ended, watches
// again; it returns the updates channel to follow.
func (m *membership) heartbeat(updates <-chan jetstream.KeyValueEntry) <-chan jetstream.KeyValueEntry {
	g := m.g
	if err := m.beat(); err != nil {
		g.log.WarnContext(m.ctx, "membership heartbeat failed", "member", g.cfg.Member, "err", err)
	} else {
		m.lastBeat = time.Now()
	}
	if updates != nil || m.ctx.Err() != nil {
		return updates
	}
	nw, err := m.kv.WatchAll(m.ctx)
	if err != nil {
		g.log.WarnContext(m.ctx, "watching membership", "err", err)
		return nil
	}
	_ = m.w.Stop()
	m.w = nw
	m.members, m.synced = map[string]bool{}, false
	return nw.Updates()
}

// reconcile starts runners for the partitions assigned to this member and
// stops the others; nothing happens before the membership is synced and
// settled.
func (m *membership) reconcile() {
	g := m.g
	if !m.synced || !m.settled {
		return
	}
	var live []string
	for id := range m.members {
		live = append(live, id)
	}
	slices.Sort(live)
	var mine []int
	// A member that could not heartbeat for a whole TTL was declared dead
	// by the others: it owns nothing until a beat succeeds.
	if m.members[g.cfg.Member] && time.Since(m.lastBeat) < g.cfg.HeartbeatTTL {
		mine = Assign(live, g.cfg.Partitions)[g.cfg.Member]
	}
	for p, r := range m.runners {
		if !slices.Contains(mine, p) && !r.stopping() {
			g.log.InfoContext(m.ctx, "releasing partition", "member", g.cfg.Member, "partition", p)
			close(r.stop)
		}
	}
	for _, p := range mine {
		if _, ok := m.runners[p]; ok {
			continue // running, or stopping: restarted when done
		}
		r := &runner{p: p, stop: make(chan struct{}), fetched: make(chan struct{}), done: make(chan struct{}),
			slots: make(chan struct{}, g.cfg.InFlight), last: map[string]chan struct{}{}}
		m.runners[p] = r
		g.log.InfoContext(m.ctx, "acquiring partition", "member", g.cfg.Member, "partition", p)
		go func() {
			g.runPartition(m.hctx, m.streams[p], r)
			m.runnerDone <- r
		}()
	}
	g.setView(live, mine)
}

// leave stops fetching everywhere, drains, unpins (in runPartition), then
// deletes the membership key so the others rebalance at once.
func (m *membership) leave() {
	g := m.g
	for _, r := range m.runners {
		if !r.stopping() {
			close(r.stop)
		}
	}
	// Loans finish (or are cancelled) before the key is deleted: their
	// owners would redeliver them as soon as this member is gone.
	lent := make(chan struct{})
	go func() {
		m.stopSharing()
		close(lent)
	}()
	for _, r := range m.runners {
		<-r.done
	}
	<-lent
	g.setView(nil, nil)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), 2*time.Second)
	defer cancel()
	if err := m.kv.Delete(dctx, g.cfg.Member); err != nil {
		g.log.WarnContext(dctx, "leaving consumer group", "member", g.cfg.Member, "err", err)
	}
	g.log.InfoContext(dctx, "left consumer group", "member", g.cfg.Member)
}
