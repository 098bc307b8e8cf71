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
//     request ends within FetchWait), settles every message it holds —
//     for up to DrainTimeout, then it cancels the handlers' context — and
//     unpins the consumer so that the new owner is pinned at once instead
//     of after PinnedTTL. Of the messages that have not started, it hands
//     back (a nak the server confirms before the unpin) only the last it
//     holds of each key and runs the others: while no pull request may take
//     them, the server's redelivery queue loses its order (each delivery
//     attempt moves its head to its tail), so two messages of one key handed
//     back could reach the new owner in either order. Until it unpins it
//     renews its pin with pull requests that take no message, as it does
//     whenever all its slots of a partition are busy: the server would pin
//     the new owner PinnedTTL after the last pull request.
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
// extractor answers an already covered request without work). So may a
// handler error (its message is redelivered after RetryDelay, the key's
// next message runs meanwhile).
//
// Clean hand-offs keep each key's order: a member settles every message it
// holds before it unpins (in keyed mode it keeps its pin meanwhile). A
// drain that outlasts DrainTimeout does not: the cancelled messages go back
// in no set order.
//
// The pin is not a lock. A member that pauses (GC, network partition) for
// longer than AckWait while holding a message lets the server redeliver that
// message to another member; for a moment both may work on it. Handlers must
// fence their writes (a compare-and-set on the revision they read) so that
// the late one is discarded.
package pcgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	// StreamOf, when set, puts partition p's consumer on its own stream
	// StreamOf(p) instead of Stream: a group over a sharded stream, one
	// partition per shard (the transcript's readers).
	StreamOf func(p int) string
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
	// (default AckWait, at least 1s): a crashed or paused member's
	// partitions wait this long. In keyed mode a member renews its pin
	// while it holds messages.
	PinnedTTL time.Duration
	// FetchWait bounds one pull request (default 5s, at most PinnedTTL/2):
	// it is how long a lost partition may keep fetching.
	FetchWait time.Duration
	// DrainTimeout is how long a member may go on with the messages it
	// holds after their partition was lost or the group stopped (default
	// AckWait); then their handlers' context is cancelled.
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
	if (c.Stream == "" && c.StreamOf == nil) || c.Partitions <= 0 || (c.Filter == nil && c.Consumer == nil) || c.Durable == nil || c.Bucket == "" || c.PriorityGroup == "" {
		return c, fmt.Errorf("%w: Stream, Partitions, Filter, Durable, PriorityGroup and Bucket are required", ErrInvalidConfig)
	}
	if c.StreamOf == nil {
		stream := c.Stream
		c.StreamOf = func(int) string { return stream }
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
