package provision

import (
	"cmp"
	"context"
	"encoding/json"
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
// stream's writes and serves its consumers. NATS elects those leaders
// without regard to balance (after a node restarts it leads nothing; after
// a rolling restart one node may lead every shard), so the point of shards
// — the transcript's load spread over the nodes — would be lost. The
// balancer moves leaders back: it reads where the shard streams' leaders
// are and asks a stream whose leader leads more than its share to step down
// in favour of a less loaded peer of the same stream
// ($JS.API.STREAM.LEADER.STEPDOWN.<stream> with a preferred placement,
// nats-server 2.11+).
//
// It is best-effort: a stepdown is a brief election on one stream
// (publishers retry), the preferred peer usually but not certainly wins,
// and nothing guarantees balance between two calls. It acts only when one
// node leads at least two streams more than a peer could, so a balanced
// layout (S divisible by the node count: exactly even; otherwise within
// one) is never touched. It acts only on a complete view (every stream has
// a leader), so it never moves leaders in the middle of an election, and
// only on a settled one: when a shard changed leader within leaderSettle
// (a move by another replica, or a node loss; a stream's first election
// excepted) it does nothing. Replicas starting one after the other thus do
// not answer each other's moves with more moves — the preferred peer does
// not always win, and a view read half way through another replica's moves
// is not the layout. Several replicas starting at the same instant compute
// the same plan from the same view; the server answers the second request
// for a move already made with an error ("already leader", or no leader
// while it elects), which is harmless.

// ErrLeaderless is returned by BalanceLeaders when a stream has no leader
// (an election is under way, or a node holding it is down): it does not act
// on an incomplete view. Try again later.
var ErrLeaderless = errors.New("a stream has no leader")

// ErrUnsettled is returned by BalanceLeaders, acting on nothing, when a
// shard stream changed leader within leaderSettle. Try again later.
var ErrUnsettled = errors.New("a stream changed leader moments ago")

// leaderSettle is how long after a shard's leader changed the balancer
// leaves the layout alone (a variable for this package's tests).
var leaderSettle = 10 * time.Second

// firstElection is how long after a stream's creation its leader's
// election counts as its first, not as a change.
const firstElection = 2 * time.Second

// BalanceTimeout bounds the balancing done by Open: milliseconds on a
// healthy cluster (one list request, and for each move a stepdown and its
// election); on a degraded one (no meta leader, an election under way) the
// start goes on after it.
const BalanceTimeout = 2 * time.Second

// LeaderMove is a leader change BalanceLeaders asked for.
type LeaderMove struct {
	Stream string // the stream whose leader stepped down
	From   string // the server that led it
	To     string // the server preferred as its new leader
}

// streamLeader is one stream's leader and the servers that may lead it.
type streamLeader struct {
	name    string
	leader  string
	peers   []string // the leader and its current, online followers
	changed bool     // the leader changed within leaderSettle
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

// BalanceLeaders spreads the leaders of the shard streams of c over the
// servers holding them, returning the stepdowns it requested (none when
// the leaders are already spread). It fails with ErrLeaderless, acting on
// nothing, while a shard stream has no leader, with ErrUnsettled while one
// changed leader moments ago, and returns the first
// stepdown request error after trying every move. After its stepdowns it
// waits, within ctx, until each moved stream has elected its new leader (so
// the caller's next requests find one); the preferred peer usually, not
// always, wins: call it again to see the result. Safe to call from many
// processes at once.
func BalanceLeaders(ctx context.Context, js jetstream.JetStream, c Config) ([]LeaderMove, error) {
	if c.withDefaults().Replicas <= 1 {
		return nil, nil
	}
	view, err := readLeaders(ctx, js, c.Layout().Streams())
	if err != nil {
		return nil, err
	}
	for _, s := range view {
		if s.leader == "" {
			return nil, fmt.Errorf("stream %s: %w", s.name, ErrLeaderless)
		}
		if s.changed {
			return nil, fmt.Errorf("stream %s: %w", s.name, ErrUnsettled)
		}
	}
	moves := planLeaderMoves(view)
	var first error
	for _, m := range moves {
		if err := stepDown(ctx, js, m); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		waitElected(ctx, js, moves)
	}
	return moves, first
}

// electionPoll bounds one stream info request while waitElected waits for
// an election (a request sent while a stream has no leader is never
// answered).
const electionPoll = 250 * time.Millisecond

// waitElected returns once every moved stream has a leader other than the
// one that stepped down, or after AttemptTimeout (the old leader may win
// the election again), or when ctx ends: the caller's next requests to
// those streams then find a leader instead of waiting out a timeout.
func waitElected(ctx context.Context, js jetstream.JetStream, moves []LeaderMove) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	for _, m := range moves {
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, electionPoll)
			s, err := js.Stream(rctx, m.Stream)
			cancel()
			if err == nil {
				if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" && ci.Leader != m.From {
					break
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(electionPoll / 5):
			}
		}
	}
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
	for _, m := range moves {
		log.Info("moving a shard stream's leader", "stream", m.Stream, "from", m.From, "to", m.To)
	}
	switch {
	case errors.Is(err, ErrUnsettled) || errors.Is(err, ErrLeaderless):
		log.Info("leaving the shard streams' leaders alone for now (the next start looks again)", "reason", err)
	case err != nil:
		log.Warn("balancing the shard streams' leaders (best effort; the next start tries again)", "error", err)
	}
}

// readLeaders lists the given streams' leaders and current peers in one
// stream list request, bounded by AttemptTimeout (a request sent while
// there is no meta leader is never answered). A stream the server does not
// list (no leader answered) has leader "".
func readLeaders(ctx context.Context, js jetstream.JetStream, streams []string) ([]streamLeader, error) {
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
	out := make([]streamLeader, len(streams))
	for i, name := range streams {
		out[i].name = name
		info := byName[name]
		if info == nil || info.Cluster == nil || info.Cluster.Leader == "" {
			continue
		}
		out[i].leader = info.Cluster.Leader
		out[i].changed = leaderChanged(info)
		out[i].peers = []string{info.Cluster.Leader}
		for _, p := range info.Cluster.Replicas {
			if p != nil && p.Current && !p.Offline {
				out[i].peers = append(out[i].peers, p.Name)
			}
		}
	}
	return out, nil
}

// leaderChanged reports whether info's leader was elected within
// leaderSettle of the answer (by the server's clock), its stream's first
// election excepted.
func leaderChanged(info *jetstream.StreamInfo) bool {
	since := info.Cluster.LeaderSince
	if since == nil || info.TimeStamp.IsZero() {
		return false
	}
	return info.TimeStamp.Sub(*since) < leaderSettle && since.Sub(info.Created) > firstElection
}

// planLeaderMoves is the balancer's plan, deterministic for a view: while
// some stream's leader leads at least two more streams than one of the
// stream's other peers, move the stream to its least loaded peer (the most
// loaded leaders first, then stream order, then server names).
func planLeaderMoves(view []streamLeader) []LeaderMove {
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
		moves = append(moves, LeaderMove{Stream: view[best].name, From: from, To: to})
		count[from]--
		count[to]++
		view[best].leader = to
	}
	return moves
}

// leastLoaded is the peer leading the fewest streams (by name on a tie).
func leastLoaded(peers []string, count map[string]int) string {
	return slices.MinFunc(peers, func(a, b string) int {
		return cmp.Or(cmp.Compare(count[a], count[b]), strings.Compare(a, b))
	})
}

// stepDown asks m.Stream's leader to step down in favour of m.To, waiting
// at most AttemptTimeout for the answer.
func stepDown(ctx context.Context, js jetstream.JetStream, m LeaderMove) error {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": m.To}})
	if err != nil {
		return err
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.LEADER.STEPDOWN."+m.Stream, body)
	if err != nil {
		return fmt.Errorf("asking %s's leader %s to step down for %s: %w", m.Stream, m.From, m.To, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("reading the stepdown answer of %s: %w", m.Stream, err)
	}
	if resp.Error != nil || !resp.Success {
		desc := "no success"
		if resp.Error != nil {
			desc = resp.Error.Description
		}
		return fmt.Errorf("stream %s's leader %s did not step down for %s: %s", m.Stream, m.From, m.To, desc)
	}
	return nil
}

// apiPrefix is the JetStream API subject prefix js sends requests to.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}
