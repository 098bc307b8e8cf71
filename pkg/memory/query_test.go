package memory

import (
	"fmt"
	"strings"
	"testing"
)

// TestPassageTail: however many passages are added, the tail holds the
// newest that fit the budget (never more than the budget), in order, and a
// passage larger than the whole budget is kept by its end.
func TestPassageTail(t *testing.T) {
	tail := NewPassageTail(1000)
	for i := range 10000 {
		tail.Add(Passage{Seq: uint64(i + 1), Text: fmt.Sprintf("passage %d %s", i+1, strings.Repeat("w", 200))})
		if tail.Tokens() > 1000 {
			t.Fatalf("after %d passages the tail holds %d tokens", i+1, tail.Tokens())
		}
	}
	ps := tail.Passages()
	if len(ps) == 0 || ps[len(ps)-1].Seq != 10000 || tail.Dropped()+len(ps) != 10000 {
		t.Fatalf("kept %d ending at %d, dropped %d", len(ps), ps[len(ps)-1].Seq, tail.Dropped())
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Seq != ps[i-1].Seq+1 {
			t.Fatalf("not the newest in order: %d then %d", ps[i-1].Seq, ps[i].Seq)
		}
	}
	qc := BuildQueryContext("", nil, ps, 1000)
	if qc.Truncated != 0 || qc.Tokens > 1000 {
		t.Fatalf("the tail does not fit BuildQueryContext's budget: %d truncated, %d tokens", qc.Truncated, qc.Tokens)
	}

	huge := NewPassageTail(500)
	huge.Add(Passage{Seq: 1, Text: strings.Repeat("x", 1<<20) + "THE END"})
	if got := huge.Passages(); len(got) != 1 || !strings.HasSuffix(got[0].Text, "THE END") || huge.Tokens() > 500 {
		t.Fatalf("a passage over the budget: %d kept, %d tokens", len(got), huge.Tokens())
	}
}

func TestSplitBudget(t *testing.T) {
	for _, c := range []struct {
		budget      int64
		n           int
		floor, want int64
	}{{50000, 1, 2000, 50000}, {50000, 20, 2000, 2500}, {50000, 100, 2000, 2000}, {1000, 5, 2000, 1000}} {
		if got := SplitBudget(c.budget, c.n, c.floor); got != c.want {
			t.Errorf("SplitBudget(%d, %d, %d) = %d, want %d", c.budget, c.n, c.floor, got, c.want)
		}
	}
}
