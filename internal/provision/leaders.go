package provision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// On a cluster every shard stream is a raft group whose leader takes the
// stream's writes, and every durable consumer on it (the trigger's, the
// indexer's, long-term memory's, one per shard) is a raft group of its own
// whose leader tracks the consumer's deliveries and acknowledgements. NATS
// elects those leaders without regard to balance (after a node restarts it
// leads nothing; after a rolling restart one node may lead every shard), so
// the point of shards — the transcript's load spread over the nodes — would
// be lost. The balancer moves leaders back: it reads where the leaders are
// and asks a group whose leader leads more than its share to step down in
// favour of a less loaded peer of the same group
// ($JS.API.STREAM.LEADER.STEPDOWN.<stream> and
// $JS.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer> with a preferred
// placement, nats-server 2.11+). It spreads each kind on its own: the shard
// streams are one set, the durables of one name on the shard streams
// another (recall-trigger on every shard spread over the nodes, then
// recall-indexer, …); ephemeral consumers (ordered reads) are left alone.
//
// It is best-effort: a stepdown is a brief election on one group
// (publishers retry; a consumer's readers resume from its acknowledged
// position), the preferred peer usually but not certainly wins, and nothing
// guarantees balance between two calls. In a set it acts only when one node
// leads at least two groups more than a peer could, so a balanced layout
// (the set's size divisible by the node count: exactly even; otherwise
// within one) is never touched. It acts on a set only when its view is
// complete (every group has a leader), so it never moves leaders in the
// middle of an election, and settled: when a group of the set changed
// leader within leaderSettle (a move by another process, or a node loss; a
// group's first election excepted) it leaves the set alone. Processes
// balancing one after the other thus do not answer each other's moves with
// more moves — the preferred peer does not always win, and a view read half
// way through another process's moves is not the layout. Processes
// balancing at the same instant compute the same plan from the same view;
// the server answers the second request for a move already made with an
// error ("already leader", or no leader while it elects), which is
// harmless.
//
// It runs when a service starts (Open, bounded by BalanceTimeout) and, in
// the services that ask for it (internal/lifecycle's KeepBalanced: the
// ingest service), every Config.BalanceEvery (KeepBalanced).

// ErrLeaderless is returned by BalanceLeaders when a group has no leader
// (an election is under way, or the nodes holding it are down): it does not
// act on an incomplete view. Try again later.
var ErrLeaderless = errors.New("a stream or consumer has no leader")

// ErrUnsettled is returned by BalanceLeaders when a group changed leader
// within leaderSettle: it leaves that group's set alone. Try again later.
var ErrUnsettled = errors.New("a stream or consumer changed leader moments ago")

// leaderSettle is how long after a group's leader changed the balancer
// leaves the group's set alone (a variable for this package's tests).
var leaderSettle = 10 * time.Second

// firstElection is how long after a stream's or consumer's creation its
// leader's election counts as its first, not as a change.
const firstElection = 2 * time.Second

// BalanceTimeout bounds the balancing done by Open: milliseconds on a
// healthy cluster (a few list requests, and for each move a stepdown and
// its election); on a degraded one (no meta leader, an election under way)
// the start goes on after it.
const BalanceTimeout = 2 * time.Second

// LeaderMove is a leader change BalanceLeaders asked for.
type LeaderMove struct {
	Stream   string // the stream whose leader, or whose consumer's, stepped down
	Consumer string // the durable consumer whose leader stepped down; "" for the stream's own
	From     string // the server that led it
	To       string // the server preferred as its new leader
}

// what names the move's group in messages.
func (m LeaderMove) what() string { return groupName(m.Stream, m.Consumer) }

// groupLeader is one raft group's leader — a shard stream's, or one of its
// durable consumers' — and the servers that may lead it.
type groupLeader struct {
	name     string // the stream
	consumer string // the durable consumer; "" for the stream itself
	leader   string
	peers    []string // the leader and its current, online followers
	changed  bool     // the leader changed within leaderSettle
}

// groupName is "stream S" or "consumer C of S".
func groupName(stream, consumer string) string {
	if consumer == "" {
		return "stream " + stream
	}
	return "consumer " + consumer + " of " + stream
}

// ShardLeaders returns the leader server of every shard stream of c
// (stream name → server name; "" while a stream has no leader). On a single
// server (no raft groups) every leader is "".
func ShardLeaders(ctx context.Context, js jetstream.JetStream, c Config) (map[string]string, error) {
	view, err := readLeaders(ctx, js, c.Layout().Streams())
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(view))
	for _, s := range view {
		out[s.name] = s.leader
	}
	return out, nil
}

// BalanceLeaders spreads the leaders of the shard streams of c, and those
// of the durable consumers on them (each durable name on its own), over
// the servers holding them, returning the stepdowns it requested (none
// when the leaders are already spread). A set with a group that has no
// leader, or that changed leader moments ago, is left alone and the error
// wraps ErrLeaderless or ErrUnsettled; the other sets are balanced. A
// failed read or stepdown request is returned instead (the first, after
// trying every move). After its stepdowns it waits, within ctx, until each
// moved group has elected its new leader (so the caller's next requests
// find one); the preferred peer usually, not always, wins: call it again to
// see the result. Safe to call from many processes at once.
func BalanceLeaders(ctx context.Context, js jetstream.JetStream, c Config) ([]LeaderMove, error) {
	if c.withDefaults().Replicas <= 1 {
		return nil, nil
	}
	streams := c.Layout().Streams()
	view, err := readLeaders(ctx, js, streams)
	if err != nil {
		return nil, err
	}
	sets, readErr := readConsumerLeaders(ctx, js, streams)
	moves, skipped := planSets(append([][]groupLeader{view}, sets...))
	return moves, cmp.Or(makeMoves(ctx, js, moves), readErr, skipped)
}

// planSets is the plan of every set whose view is complete and settled,
// and the reason the first other set was left alone.
func planSets(sets [][]groupLeader) ([]LeaderMove, error) {
	var moves []LeaderMove
	var skipped error
	for _, set := range sets {
		if err := settled(set); err != nil {
			skipped = cmp.Or(skipped, err)
			continue
		}
		moves = append(moves, planLeaderMoves(set)...)
	}
	return moves, skipped
}

// settled fails with ErrLeaderless when a group of set has no leader, and
// with ErrUnsettled when one changed leader within leaderSettle.
func settled(set []groupLeader) error {
	for _, g := range set {
		if g.leader == "" {
			return fmt.Errorf("%s: %w", groupName(g.name, g.consumer), ErrLeaderless)
		}
		if g.changed {
			return fmt.Errorf("%s: %w", groupName(g.name, g.consumer), ErrUnsettled)
		}
	}
	return nil
}

// balanceOnStart is BalanceLeaders for Open: bounded by BalanceTimeout,
// logged, never failing a start.
func balanceOnStart(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) {
	if c.withDefaults().Replicas <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, BalanceTimeout)
	defer cancel()
	moves, err := BalanceLeaders(ctx, js, c)
	logBalance(log, moves, err)
}

// logBalance logs what a BalanceLeaders call did: each move, and why it
// left a set alone (Info: a later call looks again) or failed (Warn).
func logBalance(log *slog.Logger, moves []LeaderMove, err error) {
	for _, m := range moves {
		if m.Consumer == "" {
			log.Info("moving a shard stream's leader", "stream", m.Stream, "from", m.From, "to", m.To)
		} else {
			log.Info("moving a consumer's leader", "stream", m.Stream, "consumer", m.Consumer, "from", m.From, "to", m.To)
		}
	}
	switch {
	case errors.Is(err, ErrUnsettled) || errors.Is(err, ErrLeaderless):
		log.Info("leaving some leaders alone for now (the balancer looks again later)", "reason", err)
	case err != nil:
		log.Warn("balancing the leaders (best effort; the balancer tries again later)", "error", err)
	}
}

// readLeaders lists the given streams' leaders and current peers in one
// stream list request, bounded by AttemptTimeout (a request sent while
// there is no meta leader is never answered). A stream the server does not
// list (no leader answered) has leader "".
func readLeaders(ctx context.Context, js jetstream.JetStream, streams []string) ([]groupLeader, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	byName := make(map[string]*jetstream.StreamInfo, len(streams))
	l := js.ListStreams(ctx, jetstream.WithStreamListSubject(events.SubjectTranscriptRoot+".>"))
	for info := range l.Info() {
		byName[info.Config.Name] = info
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("listing the shard streams: %w", err)
	}
	out := make([]groupLeader, len(streams))
	for i, name := range streams {
		out[i].name = name
		if info := byName[name]; info != nil {
			out[i].setLeader(info.Cluster, info.Created, info.TimeStamp)
		}
	}
	return out, nil
}

// setLeader fills g's leader, peers and changed from a stream's or
// consumer's cluster information (nil or without a leader: none), its
// creation and the time of the answer.
func (g *groupLeader) setLeader(ci *jetstream.ClusterInfo, created, at time.Time) {
	if ci == nil || ci.Leader == "" {
		return
	}
	g.leader = ci.Leader
	g.changed = leaderChanged(ci, created, at)
	g.peers = []string{ci.Leader}
	for _, p := range ci.Replicas {
		if p != nil && p.Current && !p.Offline {
			g.peers = append(g.peers, p.Name)
		}
	}
}

// leaderChanged reports whether ci's leader was elected within
// leaderSettle of at, the time of the answer (by the server's clock), the
// group's first election after its creation excepted.
func leaderChanged(ci *jetstream.ClusterInfo, created, at time.Time) bool {
	since := ci.LeaderSince
	if since == nil || at.IsZero() {
		return false
	}
	return at.Sub(*since) < leaderSettle && since.Sub(created) > firstElection
}

// planLeaderMoves is the balancer's plan for one set, deterministic for a
// view: while some group's leader leads at least two more groups of the set
// than one of the group's other peers, move the group to its least loaded
// peer (the most loaded leaders first, then the set's order, then server
// names).
func planLeaderMoves(view []groupLeader) []LeaderMove {
	view = slices.Clone(view)
	count := map[string]int{}
	for _, s := range view {
		for _, p := range s.peers {
			count[p] += 0
		}
		if s.leader != "" {
			count[s.leader]++
		}
	}
	var moves []LeaderMove
	for range view {
		best, to := -1, ""
		for i, s := range view {
			if s.leader == "" {
				continue
			}
			p := leastLoaded(s.peers, count)
			if count[s.leader]-count[p] < 2 {
				continue
			}
			if best < 0 || count[s.leader] > count[view[best].leader] {
				best, to = i, p
			}
		}
		if best < 0 {
			break
		}
		from := view[best].leader
		moves = append(moves, LeaderMove{Stream: view[best].name, Consumer: view[best].consumer, From: from, To: to})
		count[from]--
		count[to]++
		view[best].leader = to
	}
	return moves
}

// leastLoaded is the peer leading the fewest groups (by name on a tie).
func leastLoaded(peers []string, count map[string]int) string {
	return slices.MinFunc(peers, func(a, b string) int {
		return cmp.Or(cmp.Compare(count[a], count[b]), strings.Compare(a, b))
	})
}
