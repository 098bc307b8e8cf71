// Package pcgroup is a partitioned consumer group on JetStream: a stream's
// messages are split into P static partitions (by a subject transform at
// ingest), each partition has one durable pull consumer, and the live
// members of the group share the partitions between them, so that the
// messages of one partition are handled in order by one member — one at a
// time, or, in keyed mode (Config.KeyOf), one at a time per key with
// different keys at once — while members join, leave, crash or pause.
//
// # Moving parts
//
//   - Membership: every member keeps a key in a KV bucket alive with per-key
//     TTL heartbeats (a put with a Nats-TTL header; kv.Update would drop the
//     TTL). A member that stops heartbeating disappears when its TTL expires;
//     a member that stops cleanly deletes its key at once.
//   - Assignment: every member watches the bucket (no polling) and computes
//     the same assignment from the same member set with Assign (rendezvous
//     hashing with bounded load). A member fetches only from the partitions
//     assigned to it. A member whose own heartbeat has not succeeded for a
//     whole TTL assumes it was declared dead and gives up every partition.
//   - Consumers: partition p has the durable Config.Durable(p) filtered on
//     Config.Filter(p), AckExplicit, MaxAckPending 1 (Config.InFlight in
//     keyed mode), AckWait, no
//     InactiveThreshold (a durable deleted mid-processing would replay), and
//     a pinned priority group, so that during a hand-off only one member at
//     a time receives messages.
//   - Hand-off: a member that loses a partition stops fetching (its last pull
//     request ends within FetchWait), lets the in-flight message finish for
//     up to DrainTimeout (then cancels the handler's context), and unpins
//     the consumer so that the new owner is pinned at once instead of after
//     PinnedTTL.
//   - In progress: while a handler runs, the group renews the message's
//     AckWait with in-progress acks.
//   - Work sharing: with Config.Share (keyed mode), a message that waits
//     for one of its owner's slots may run on another member with a free
//     slot; the owner keeps the key, the AckWait and the settlement (see
//     share.go).
//   - Consume mode: with Config.Consume (and usually Config.Consumer), the
//     group does membership, assignment, consumer creation and unpinning,
//     and hands each owned partition's consumer to Consume, which reads it
//     its own way (e.g. a stream of records acknowledged with AckAll, as the
//     trigger does) until its context is cancelled on hand-off or stop.
//
// # What is not guaranteed
//
// In keyed mode, after a member crashes the server redelivers the messages
// it held only when their AckWait expires, so a later message of a key may
// be handled before an earlier one; handlers must tolerate that (the
// extractor answers an already covered request without work). Clean
// hand-offs keep each key's order: a member settles every message it holds
// before it unpins.
//
// The pin is not a lock. A member that pauses (GC, network partition) for
// longer than AckWait while holding a message lets the server redeliver that
// message to another member; for a moment both may work on it. Handlers must
// fence their writes (a compare-and-set on the revision they read) so that
// the late one is discarded.
package pcgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
)

// Errors.
var (
	// ErrInvalidConfig is wrapped by New for an unusable Config.
	ErrInvalidConfig = errors.New("pcgroup: invalid configuration")
)

// Config configures a Group. Zero durations take the defaults noted.
type Config struct {
	// Stream is the partitioned stream.
	Stream string
	// Partitions is the fixed partition count P.
	Partitions int
	// Filter and Durable name partition p's filter subject and durable.
	Filter  func(p int) string
	Durable func(p int) string
	// PriorityGroup is the pinned priority group every consumer declares.
	PriorityGroup string
	// Bucket is the membership KV bucket (it must allow per-key TTLs).
	Bucket string
	// Member is this member's id: a valid KV key (letters, digits, - _ = /).
	Member string

	// HeartbeatTTL is the membership key's TTL (default 10s, at least 1s);
	// the key is renewed every third of it.
	HeartbeatTTL time.Duration
	// AckWait is the consumers' ack wait (default 30s); in-progress acks are
	// sent every third of it while a handler runs.
	AckWait time.Duration
	// PinnedTTL unpins a member that sent no pull request for this long
	// (default AckWait, at least 1s).
	PinnedTTL time.Duration
	// FetchWait bounds one pull request (default 5s, at most PinnedTTL/2):
	// it is how long a lost partition may keep fetching.
	FetchWait time.Duration
	// DrainTimeout is how long an in-flight handler may run after its
	// partition was lost or the group stopped (default AckWait).
	DrainTimeout time.Duration
	// RetryDelay is the Nak delay after a handler error (default 1s).
	RetryDelay time.Duration
	// Concurrency bounds the handlers running at once (default Partitions).
	Concurrency int
	// KeyOf, when set, lets one partition handle several messages at once:
	// messages whose subjects have different keys run concurrently (up to
	// InFlight per partition, Concurrency in all), messages with the same
	// key strictly one after the other, in stream order. Without it a
	// partition handles one message at a time.
	KeyOf func(subject string) string
	// InFlight is a partition's MaxAckPending with KeyOf (default
	// Concurrency); without KeyOf it is 1.
	InFlight int
	// Settle delays a member's first acquisition after it joined, so that
	// members started together see each other before they take
	// partitions instead of taking them and handing them over a moment
	// later — which costs a lot where taking a partition is expensive
	// (the trigger rebuilds the state of the partition's sessions).
	// Default 0: acquire at once.
	Settle time.Duration

	// Consumer, when set, gives partition p's consumer configuration
	// instead of the one-message-in-flight default (see consumerConfig). It
	// is used when the consumer is created; an existing durable is updated
	// with it but keeps its deliver policy and start.
	Consumer func(p int) jetstream.ConsumerConfig
	// Consume, when set, replaces the handler: the group calls it with the
	// consumer of every partition it acquires, and it consumes the way it
	// wants (batches, AckAll…) until ctx is cancelled — at once when the
	// partition is lost or the group stops — and then returns, settling
	// what it can within its own bound. A non-nil error before ctx ends
	// restarts it after a backoff. The group still unpins the consumer
	// when Consume returns.
	Consume func(ctx context.Context, p int, cons jetstream.Consumer) error

	// Share, in keyed mode, is the subject on which the members offer each
	// other the messages that wait for a slot (see share.go); the results
	// travel on Share + ".result.<member>". Each member serves both
	// endpoints with AddShareEndpoints. Empty: no sharing.
	Share string
	// ShareCheck is how often an owner asks the member running one of its
	// messages whether it still runs it (default 30s): a result that never
	// arrives is then found out and the message redelivered.
	ShareCheck time.Duration

	Log *slog.Logger
}

var memberRE = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

func (c Config) withDefaults() (Config, error) {
	if c.Stream == "" || c.Partitions <= 0 || (c.Filter == nil && c.Consumer == nil) || c.Durable == nil || c.Bucket == "" || c.PriorityGroup == "" {
		return c, fmt.Errorf("%w: Stream, Partitions, Filter, Durable, PriorityGroup and Bucket are required", ErrInvalidConfig)
	}
	if !memberRE.MatchString(c.Member) {
		return c, fmt.Errorf("%w: member id %q must be letters, digits, - _ = /", ErrInvalidConfig, c.Member)
	}
	if c.HeartbeatTTL <= 0 {
		c.HeartbeatTTL = 10 * time.Second
	}
	if c.HeartbeatTTL < time.Second {
		c.HeartbeatTTL = time.Second
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.PinnedTTL <= 0 {
		c.PinnedTTL = c.AckWait
	}
	if c.PinnedTTL < time.Second {
		c.PinnedTTL = time.Second
	}
	if c.FetchWait <= 0 {
		c.FetchWait = 5 * time.Second
	}
	if c.FetchWait > c.PinnedTTL/2 {
		c.FetchWait = c.PinnedTTL / 2
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = c.AckWait
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.ShareCheck <= 0 {
		c.ShareCheck = 30 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = c.Partitions
	}
	if c.KeyOf == nil || c.InFlight <= 0 {
		c.InFlight = c.Concurrency
	}
	if c.KeyOf == nil {
		c.InFlight = 1
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Handler handles one message. It may settle the message itself (Msg.Ack,
// Msg.Term, Msg.Nak); when it returns without doing so, the group acks it on
// a nil error and naks it with Config.RetryDelay on an error. The context is
// cancelled when the member stops or loses the partition and DrainTimeout
// has passed.
type Handler func(ctx context.Context, m *Msg) error

// Msg is a message of one partition. It wraps the JetStream message and
// exposes only its content and the three ways to settle it, so that every
// settlement goes through the group's settled flag (which stops the
// in-progress acks).
type Msg struct {
	msg delivery
	// Partition is the partition the message came from.
	Partition int
	settled   atomic.Bool
}

// Subject is the message's stored subject.
func (m *Msg) Subject() string { return m.msg.Subject() }

// Headers are the message's headers.
func (m *Msg) Headers() nats.Header { return m.msg.Headers() }

// Data is the message's payload.
func (m *Msg) Data() []byte { return m.msg.Data() }

// Metadata is the message's JetStream metadata (sequences, deliveries).
func (m *Msg) Metadata() (*jetstream.MsgMetadata, error) { return m.msg.Metadata() }

// Ack acknowledges the message and waits for the server to confirm it, so a
// nil error means the message will not be redelivered.
func (m *Msg) Ack(ctx context.Context) error {
	m.settled.Store(true)
	return m.msg.DoubleAck(ctx)
}

// Term tells the server never to redeliver the message (a WorkQueue stream
// deletes it).
func (m *Msg) Term(reason string) error {
	m.settled.Store(true)
	return m.msg.TermWithReason(reason)
}

// Nak asks for redelivery after delay.
func (m *Msg) Nak(delay time.Duration) error {
	m.settled.Store(true)
	return m.msg.NakWithDelay(delay)
}

// memberInfo is the value of a membership key.
type memberInfo struct {
	Member     string    `json:"member"`
	Since      time.Time `json:"since"`
	Partitions int       `json:"partitions"`
}

// Group is one member of a partitioned consumer group. Create it with New
// and call Run once.
type Group struct {
	cfg     Config
	js      jetstream.JetStream
	handler Handler
	log     *slog.Logger
	sem     chan struct{}
	share   sharing
	shareOn atomic.Bool // AddShareEndpoints was called

	mu       sync.Mutex
	members  []string
	owned    []int
	onChange []chan struct{}
}

// New returns a member of the group described by cfg that runs h for every
// message of the partitions it owns.
func New(js jetstream.JetStream, cfg Config, h Handler) (*Group, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, js: js, handler: h, log: cfg.Log, sem: make(chan struct{}, cfg.Concurrency)}
	g.share.wake, g.share.grants, g.share.reserved = make(chan struct{}, 1), make(chan grant), map[string]*time.Timer{}
	return g, nil
}

// Member is this member's id.
func (g *Group) Member() string { return g.cfg.Member }

// Config is the configuration in use, defaults applied.
func (g *Group) Config() Config { return g.cfg }

// Owned returns the partitions this member currently fetches from, sorted.
func (g *Group) Owned() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.owned)
}

// Members returns the live members this member currently sees, sorted.
func (g *Group) Members() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.members)
}

// Changed returns a channel closed at the next change of Owned or Members.
func (g *Group) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan struct{})
	g.onChange = append(g.onChange, ch)
	return ch
}

func (g *Group) setView(members []string, owned []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Equal(g.members, members) && slices.Equal(g.owned, owned) {
		return
	}
	g.members, g.owned = members, owned
	for _, ch := range g.onChange {
		close(ch)
	}
	g.onChange = nil
}

// runner is the fetch loop of one owned partition.
type runner struct {
	p    int
	stop chan struct{} // closed: stop fetching, drain
	done chan struct{} // closed when the loop and its handlers returned

	// Keyed mode (Config.KeyOf): slots bounds the messages held, last is
	// the done channel of each key's newest message, handlers counts the
	// running handler goroutines.
	slots    chan struct{}
	mu       sync.Mutex
	last     map[string]chan struct{}
	handlers sync.WaitGroup
}

func (r *runner) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// Run joins the group and serves until ctx is done. Then it stops fetching,
// lets in-flight handlers finish for up to DrainTimeout, unpins its
// consumers and deletes its membership key, so the others take over at once;
// a clean stop returns nil. Run returns an error only when it cannot join.
func (g *Group) Run(ctx context.Context) error {
	kv, err := g.js.KeyValue(ctx, g.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("opening membership bucket %s: %w", g.cfg.Bucket, err)
	}
	stream, err := g.js.Stream(ctx, g.cfg.Stream)
	if err != nil {
		return fmt.Errorf("opening stream %s: %w", g.cfg.Stream, err)
	}
	info, _ := json.Marshal(memberInfo{Member: g.cfg.Member, Since: time.Now().UTC(), Partitions: g.cfg.Partitions})
	m := &membership{g: g, ctx: ctx, kv: kv, stream: stream, info: info,
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
	stream     jetstream.Stream
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
		r := &runner{p: p, stop: make(chan struct{}), done: make(chan struct{}), slots: make(chan struct{}, g.cfg.InFlight), last: map[string]chan struct{}{}}
		m.runners[p] = r
		g.log.InfoContext(m.ctx, "acquiring partition", "member", g.cfg.Member, "partition", p)
		go func() {
			g.runPartition(m.hctx, m.stream, r)
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

// consumerConfig is partition p's durable consumer.
func (g *Group) consumerConfig(p int) jetstream.ConsumerConfig {
	if g.cfg.Consumer != nil {
		return g.cfg.Consumer(p)
	}
	return jetstream.ConsumerConfig{
		Durable:        g.cfg.Durable(p),
		Description:    fmt.Sprintf("partition %d of %s", p, g.cfg.Stream),
		FilterSubject:  g.cfg.Filter(p),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        g.cfg.AckWait,
		MaxAckPending:  g.cfg.InFlight,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{g.cfg.PriorityGroup},
		PinnedTTL:      g.cfg.PinnedTTL,
		// No InactiveThreshold: a durable must never be reaped while a
		// member is busy with its message.
	}
}

// runPartition fetches and handles partition r.p's messages until r.stop is
// closed, then drains and unpins.
func (g *Group) runPartition(hctx context.Context, stream jetstream.Stream, r *runner) {
	if g.cfg.Consume != nil {
		g.consumePartition(hctx, stream, r)
		return
	}
	defer close(r.done)
	// The handler's context ends DrainTimeout after the stop signal.
	hctx, cancel := context.WithCancel(hctx)
	defer cancel()
	go g.cancelAfterDrain(r, cancel)
	f := &fetcher{g: g, r: r, stream: stream, durable: g.cfg.Durable(r.p),
		log: g.log.With("member", g.cfg.Member, "partition", r.p), backoff: minBackoff}
	for !r.stopping() && f.step(hctx) {
		// one fetch per step
	}
	// Every message this member holds is settled before the next owner can
	// be pinned, so a key's messages never run on two members at once.
	r.handlers.Wait()
	// Unpin so the next owner is pinned now, not after PinnedTTL.
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(hctx), 2*time.Second)
	defer ucancel()
	if err := stream.UnpinConsumer(uctx, f.durable, g.cfg.PriorityGroup); err != nil {
		f.log.DebugContext(uctx, "unpinning", "durable", f.durable, "err", err)
	}
}

// cancelAfterDrain cancels the handlers' context DrainTimeout after r is
// told to stop, unless the loop is done first.
func (g *Group) cancelAfterDrain(r *runner, cancel context.CancelFunc) {
	select {
	case <-r.stop:
		t := time.NewTimer(g.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-r.done:
		}
	case <-r.done:
	}
}

// minBackoff is the first pause after a failed consumer creation or fetch;
// it doubles up to about 5 s and resets after a good fetch.
const minBackoff = 100 * time.Millisecond

// fetcher is the fetch loop of one partition in handler mode.
type fetcher struct {
	g       *Group
	r       *runner
	stream  jetstream.Stream
	durable string
	log     *slog.Logger
	cons    jetstream.Consumer
	backoff time.Duration
}

// pause waits the backoff (and doubles it); false when the partition is
// being stopped meanwhile.
func (f *fetcher) pause() bool {
	t := time.NewTimer(f.backoff)
	defer t.Stop()
	if f.backoff < 5*time.Second {
		f.backoff *= 2
	}
	select {
	case <-t.C:
		return true
	case <-f.r.stop:
		return false
	}
}

// step makes sure the consumer exists, fetches one message and dispatches
// it; false when the loop must end.
func (f *fetcher) step(hctx context.Context) bool {
	g, r := f.g, f.r
	if f.cons == nil {
		cctx, ccancel := context.WithTimeout(hctx, 10*time.Second)
		c, err := f.stream.CreateOrUpdateConsumer(cctx, g.consumerConfig(r.p))
		ccancel()
		if err != nil {
			f.log.WarnContext(hctx, "creating partition consumer", "durable", f.durable, "err", err)
			return f.pause()
		}
		f.cons = c
	}
	if !g.takeSlot(r) {
		return false
	}
	batch, err := f.cons.Fetch(1, jetstream.FetchMaxWait(g.cfg.FetchWait), jetstream.FetchPriorityGroup(g.cfg.PriorityGroup))
	if err != nil {
		g.releaseSlot(r)
		if isGone(err) {
			f.cons = nil
		}
		f.log.WarnContext(hctx, "fetching", "durable", f.durable, "err", err)
		return f.pause()
	}
	got := false
	for m := range batch.Messages() {
		got = true
		if r.stopping() {
			// Lost the partition while the pull was open: hand the message
			// back at once for the next owner.
			_ = m.Nak()
			g.releaseSlot(r)
			continue
		}
		g.dispatch(hctx, r, m, f.log)
	}
	if !got {
		g.releaseSlot(r)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		if isGone(err) {
			f.cons = nil
		}
		if !errors.Is(err, jetstream.ErrPinIDMismatch) {
			f.log.WarnContext(hctx, "fetching", "durable", f.durable, "err", err)
			return f.pause()
		}
		return true
	}
	f.backoff = minBackoff
	return true
}

// consumePartition runs Config.Consume on partition r.p's consumer until
// r.stop is closed, restarting it with a backoff when it fails, then
// unpins.
func (g *Group) consumePartition(hctx context.Context, stream jetstream.Stream, r *runner) {
	defer close(r.done)
	ctx, cancel := context.WithCancel(hctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := g.log.With("member", g.cfg.Member, "partition", r.p)
	durable := g.cfg.Durable(r.p)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cons, err := g.ensureConsumer(ctx, stream, r.p)
		if err == nil {
			err = g.cfg.Consume(ctx, r.p, cons)
		}
		if ctx.Err() != nil {
			break
		}
		log.WarnContext(ctx, "consuming partition; restarting", "durable", durable, "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(hctx), 2*time.Second)
	defer ucancel()
	if err := stream.UnpinConsumer(uctx, durable, g.cfg.PriorityGroup); err != nil {
		log.DebugContext(uctx, "unpinning", "durable", durable, "err", err)
	}
}

// ensureConsumer returns partition p's durable, creating it with
// consumerConfig, or updating an existing one with it while keeping the
// existing deliver policy and start (they cannot change).
func (g *Group) ensureConsumer(ctx context.Context, stream jetstream.Stream, p int) (jetstream.Consumer, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want := g.consumerConfig(p)
	c, err := stream.Consumer(cctx, want.Durable)
	if isGone(err) {
		return stream.CreateConsumer(cctx, want)
	}
	if err != nil {
		return nil, err
	}
	have := c.CachedInfo().Config
	want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = have.DeliverPolicy, have.OptStartSeq, have.OptStartTime
	return stream.UpdateConsumer(cctx, want)
}

func isGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerDoesNotExist)
}

// handle runs the handler on m with in-progress acks, a concurrency slot and
// panic recovery, and settles m if the handler did not.
func (g *Group) handle(ctx context.Context, r *runner, jm jetstream.Msg, log *slog.Logger, prev <-chan struct{}) {
	m := &Msg{msg: jm, Partition: r.p}
	// Keep the message ours while waiting for a slot and while working.
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	progressWG.Add(1)
	go func() {
		defer progressWG.Done()
		t := time.NewTicker(g.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if m.settled.Load() {
					return
				}
				if err := jm.InProgress(); err != nil {
					log.DebugContext(ctx, "in-progress ack", "err", err)
				}
			case <-progressDone:
				return
			}
		}
	}()
	defer func() {
		close(progressDone)
		progressWG.Wait()
	}()
	// The key's previous message settles first, even when stopping: its
	// successor is handed back only after it, so the next owner sees them
	// in order. (Its handler is bounded by DrainTimeout.)
	if prev != nil {
		<-prev
	}
	switch g.acquire(ctx, r, m, log) {
	case slotStopped:
		_ = m.Nak(0)
		return
	case slotShared:
		return
	}
	defer func() { <-g.sem }()
	err := g.call(ctx, m)
	if m.settled.Load() {
		return
	}
	g.settleDefault(ctx, m, err, log)
}

// settleDefault settles a message its handler left unsettled: a nak with
// RetryDelay after an error, else an ack.
func (g *Group) settleDefault(ctx context.Context, m *Msg, err error, log *slog.Logger) {
	if err != nil {
		log.WarnContext(ctx, "handler failed; redelivering", "err", err, "delay", g.cfg.RetryDelay)
		_ = m.Nak(g.cfg.RetryDelay)
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.Ack(actx); err != nil {
		log.WarnContext(ctx, "acking", "err", err)
	}
}

// takeSlot waits for a free message slot of r in keyed mode (always true
// otherwise); false when r stops first.
func (g *Group) takeSlot(r *runner) bool {
	if g.cfg.KeyOf == nil {
		return true
	}
	select {
	case r.slots <- struct{}{}:
		return true
	case <-r.stop:
		return false
	}
}

// releaseSlot frees a slot taken by takeSlot.
func (g *Group) releaseSlot(r *runner) {
	if g.cfg.KeyOf != nil {
		<-r.slots
	}
}

// dispatch handles jm: inline without KeyOf; in keyed mode on its own
// goroutine, after the previous message of its key.
func (g *Group) dispatch(ctx context.Context, r *runner, jm jetstream.Msg, log *slog.Logger) {
	if g.cfg.KeyOf == nil {
		g.handle(ctx, r, jm, log, nil)
		return
	}
	key := g.cfg.KeyOf(jm.Subject())
	done := make(chan struct{})
	r.mu.Lock()
	prev := r.last[key]
	r.last[key] = done
	r.mu.Unlock()
	r.handlers.Add(1)
	go func() {
		defer r.handlers.Done()
		defer g.releaseSlot(r)
		defer func() {
			r.mu.Lock()
			if r.last[key] == done {
				delete(r.last, key)
			}
			r.mu.Unlock()
			close(done)
		}()
		g.handle(ctx, r, jm, log, prev)
	}()
}

func (g *Group) call(ctx context.Context, m *Msg) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return g.handler(ctx, m)
}
