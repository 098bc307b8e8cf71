package indexersvc

import (
	"math"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/envconf/envconftest"
	"github.com/recallhq/recall/pkg/memory"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags), and those are the domain's.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	lit.Provider = env.Provider
	envconftest.SameDefaults(t, lit, env)
	if lit.MinNewUserMessages != memory.DefaultMinNewUserMessages || lit.MaxInputBytes != memory.DefaultIndexMaxBytes ||
		lit.QueryBudgetTokens != memory.DefaultQueryBudgetTokens || lit.QueryMaxBudgetTokens != DefaultQueryMaxBudgetTokens ||
		lit.ResolveMaxRefs != DefaultResolveMaxRefs {
		t.Fatalf("tag defaults differ from the domain's: %v", lit.LogValue())
	}
}

func TestPrices(t *testing.T) {
	p, err := parsePrices("my-model=2:10, claude-haiku-4-5=0.5:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := cost(p, "my-model", 1_000_000, 100_000); math.Abs(got-3) > 1e-9 {
		t.Fatalf("my-model: %v", got)
	}
	// A dated version takes its family's price; an override wins.
	if got := cost(p, "claude-haiku-4-5-20251001", 2_000_000, 0); math.Abs(got-1) > 1e-9 {
		t.Fatalf("dated haiku: %v", got)
	}
	if cost(p, "unknown", 1e6, 1e6) != 0 {
		t.Fatal("unknown model priced")
	}
	for _, bad := range []string{"x", "x=1", "x=a:1", "=1:2", "x=-1:2"} {
		if _, err := parsePrices(bad); err == nil || !strings.Contains(err.Error(), "RECALL_INDEX_PRICES") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestCounterKeepsRequestsSeenWhileCounting(t *testing.T) {
	x := &Indexer{sessions: map[string]*counter{}}
	// The consumer sees requests 5 and 7 before a transcript count up to 4
	// (which found 2 and 3) is merged: all four count.
	x.observe("k", 5)
	x.observe("k", 7)
	x.setCounted("k", 1, []uint64{2, 3})
	if n, ok := x.pending("k", 1); !ok || n != 4 {
		t.Fatalf("pending: %d %v", n, ok)
	}
	x.observe("k", 7) // a redelivery counts once
	if n, _ := x.pending("k", 1); n != 4 {
		t.Fatalf("after a redelivery: %d", n)
	}
	// An indexing up to 6 leaves 7 pending; another base is unknown.
	x.setCounted("k", 6, nil)
	if n, ok := x.pending("k", 6); !ok || n != 1 {
		t.Fatalf("after indexing: %d %v", n, ok)
	}
	if _, ok := x.pending("k", 9); ok {
		t.Fatal("a count since another indexing is not known")
	}
}
