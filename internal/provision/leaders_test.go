package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

func TestPlanLeaderMoves(t *testing.T) {
	all := []string{"a", "b", "c"}
	led := func(leaders ...string) []groupLeader {
		out := make([]groupLeader, len(leaders))
		for i, l := range leaders {
			out[i] = groupLeader{name: fmt.Sprintf("S%d", i), leader: l, peers: all}
		}
		return out
	}
	tests := []struct {
		name string
		view []groupLeader
		want []LeaderMove
	}{
		{"balanced", led("a", "b", "c", "a", "b", "c"), nil},
		{"within one", led("a", "a", "b", "c", "b"), nil},
		{"all on one", led("a", "a", "a", "a", "a", "a"), []LeaderMove{
			mv("S0", "a", "b"), mv("S1", "a", "c"), mv("S2", "a", "b"), mv("S3", "a", "c")}},
		{"a returning node", led("a", "b", "a", "b", "a", "b"), []LeaderMove{mv("S0", "a", "c"), mv("S1", "b", "c")}},
		{"two of three on one, none on the third", led("a", "a", "b"), []LeaderMove{mv("S0", "a", "c")}},
		{"two on one, one elsewhere, two nodes", []groupLeader{
			{name: "S0", leader: "a", peers: []string{"a", "b"}},
			{name: "S1", leader: "a", peers: []string{"a", "b"}},
			{name: "S2", leader: "b", peers: []string{"a", "b"}},
		}, nil},
		{"offline peer is never chosen", []groupLeader{
			{name: "S0", leader: "a", peers: []string{"a", "b"}},
			{name: "S1", leader: "a", peers: []string{"a", "b"}},
			{name: "S2", leader: "a", peers: []string{"a", "b"}},
		}, []LeaderMove{mv("S0", "a", "b")}},
		{"a peer outside the stream's group is not a target", []groupLeader{
			{name: "S0", leader: "a", peers: []string{"a", "b"}},
			{name: "S1", leader: "a", peers: []string{"a", "b"}},
			{name: "S2", leader: "b", peers: []string{"b", "c"}},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planLeaderMoves(tt.view)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("moves %v, want %v", got, tt.want)
			}
			if again := planLeaderMoves(applyMoves(tt.view, got)); len(again) != 0 {
				t.Fatalf("after the moves the plan is %v, want none (idempotent)", again)
			}
		})
	}
}

// TestPlanSets: every set is planned on its own (the shard streams, the
// durables of one name); a set with a member that changed leader moments
// ago or has none is left alone, and the other sets are still balanced.
func TestPlanSets(t *testing.T) {
	all := []string{"a", "b", "c"}
	set := func(consumer string, leaders ...string) []groupLeader {
		out := make([]groupLeader, len(leaders))
		for i, l := range leaders {
			out[i] = groupLeader{name: fmt.Sprintf("S%d", i), consumer: consumer, leader: l, peers: all}
		}
		return out
	}
	unsettled := set("recall-indexer", "a", "a", "a", "a", "a", "a")
	unsettled[4].changed = true
	leaderless := set("recall-longterm", "a", "a", "a", "a", "a", "a")
	leaderless[2].leader, leaderless[2].peers = "", nil
	moves, err := planSets([][]groupLeader{
		set("", "a", "b", "c", "a", "b", "c"), unsettled, leaderless, set("recall-trigger", "a", "a", "a", "a", "a", "b"),
	})
	want := []LeaderMove{
		{Stream: "S0", Consumer: "recall-trigger", From: "a", To: "c"},
		{Stream: "S1", Consumer: "recall-trigger", From: "a", To: "b"},
		{Stream: "S2", Consumer: "recall-trigger", From: "a", To: "c"},
	}
	if !reflect.DeepEqual(moves, want) {
		t.Errorf("moves %v, want %v (the trigger's durables only)", moves, want)
	}
	if !errors.Is(err, ErrUnsettled) || !strings.Contains(err.Error(), "consumer recall-indexer of S4") {
		t.Errorf("error %v, want the first set left alone: consumer recall-indexer of S4, unsettled", err)
	}
	if _, err := planSets([][]groupLeader{leaderless}); !errors.Is(err, ErrLeaderless) {
		t.Errorf("a set with a leaderless member: error %v, want ErrLeaderless", err)
	}
}

// mv is a move of stream stream's leader.
func mv(stream, from, to string) LeaderMove { return LeaderMove{Stream: stream, From: from, To: to} }

func applyMoves(view []groupLeader, moves []LeaderMove) []groupLeader {
	out := make([]groupLeader, len(view))
	copy(out, view)
	for _, m := range moves {
		for i := range out {
			if out[i].name == m.Stream {
				out[i].leader = m.To
			}
		}
	}
	return out
}

// TestBalanceLeadersOnCluster moves every shard stream's leader to one node
// of a three-node cluster, then balances: two leaders per node, and a
// second call moves nothing.
func TestBalanceLeadersOnCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Replicas: 3, Shards: 6, MemoryStorage: true}
	for _, sc := range TranscriptStreams(cfg) {
		if err := ensureStream(ctx, js, sc); err != nil {
			t.Fatal(err)
		}
	}
	concentrate(t, ctx, js, cfg, "n0")

	// One pass, as Open does it (without waiting for the layout to settle
	// after concentrate's moves), then wait for the elections it started.
	defer func(d time.Duration) { leaderSettle = d }(leaderSettle)
	leaderSettle = 0
	var logs strings.Builder
	balanceOnStart(ctx, js, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	t.Logf("balancing at start:\n%s", logs.String())
	if n := strings.Count(logs.String(), "moving a shard stream's leader"); n != 4 {
		t.Errorf("%d moves requested, want 4 (two of n0's six leaders to each of n1, n2)", n)
	}
	testpoll.Until(t, 10*time.Second, "the elections the balancer started", func() bool {
		view, err := readLeaders(ctx, js, cfg.Layout().Streams())
		if err != nil {
			return false
		}
		for _, s := range view {
			if s.leader == "" {
				return false
			}
		}
		return len(planLeaderMoves(view)) == 0
	})
	leaders, err := ShardLeaders(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, l := range leaders {
		per[l]++
	}
	t.Logf("leaders per node after balancing: %v", per)
	if len(per) != 3 || per["n0"] != 2 || per["n1"] != 2 || per["n2"] != 2 {
		t.Fatalf("leaders per node %v, want 2 on each of n0, n1, n2", per)
	}
	if moves, err := BalanceLeaders(ctx, js, cfg); err != nil || len(moves) != 0 {
		t.Fatalf("a balanced cluster: moves %v, error %v; want none", moves, err)
	}
}

// concentrate makes node the leader of every shard stream of cfg, asking
// the others' leaders to step down for it until it leads them all.
func concentrate(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg Config, node string) {
	t.Helper()
	testpoll.Until(t, 30*time.Second, "every leader on "+node, func() bool {
		view, err := readLeaders(ctx, js, cfg.Layout().Streams())
		if err != nil {
			return false
		}
		all := true
		for _, s := range view {
			if s.leader == node {
				continue
			}
			all = false
			if s.leader != "" {
				_ = stepDown(ctx, js, LeaderMove{Stream: s.name, From: s.leader, To: node}) // retried on the next poll
			}
		}
		return all
	})
}

func TestLeaderChanged(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := created.Add(d); return &v }
	tests := []struct {
		name       string
		since, now *time.Time
		want       bool
	}{
		{"a leader elected seconds ago", at(time.Hour), at(time.Hour + 2*time.Second), true},
		{"a leader elected long ago", at(time.Hour), at(time.Hour + time.Minute), false},
		{"the first election of a new stream", at(100 * time.Millisecond), at(2 * time.Second), false},
		{"a server that does not say", nil, at(time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci := &jetstream.ClusterInfo{Leader: "n0", LeaderSince: tt.since}
			if got := leaderChanged(ci, created, *tt.now); got != tt.want {
				t.Fatalf("leaderChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
