package prices_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/prices"
)

func TestParseAndCost(t *testing.T) {
	table, err := prices.Parse("my-model=2:10, claude-haiku-4-5=0.5:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model   string
		in, out int64
		want    float64
		ok      bool
	}{
		{"my-model", 1_000_000, 100_000, 3, true},
		{"claude-haiku-4-5-20251001", 2_000_000, 0, 1, true}, // a dated version takes its family's price; the override wins
		{"claude-sonnet-4-5", 1_000_000, 1_000_000, 18, true},
		{llm.OfflineModel, 1e6, 1e6, 0, true},
		{"unknown", 1e6, 1e6, 0, false},
		{"", 1e6, 1e6, 0, false},
	} {
		t.Run(c.model, func(t *testing.T) {
			got, ok := table.Cost(c.model, c.in, c.out)
			if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("Cost = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestParseRefusesMalformedEntries(t *testing.T) {
	for _, bad := range []string{"x", "x=1", "x=a:1", "=1:2", "x=-1:2", "x=1:-2", "x=NaN:1", "x=1:Inf", "x=-inf:1", "x=1:2:3"} {
		if _, err := prices.Parse(bad); !errors.Is(err, prices.ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if table, err := prices.Parse(" , "); err != nil || len(table) != len(prices.Default()) {
		t.Fatalf("an empty spec: %v, %d entries", err, len(table))
	}
}

func TestDefaultIsACopy(t *testing.T) {
	a := prices.Default()
	a["claude-haiku-4-5"] = prices.Price{In: 99}
	if p, _ := prices.Default().Lookup("claude-haiku-4-5"); p.In != 1 {
		t.Fatalf("changing one Default changed the built-in table: %+v", p)
	}
}

func ExampleTable_Cost() {
	table, _ := prices.Parse("my-model=2:10")
	usd, ok := table.Cost("my-model-2025", 150_000, 2_000)
	fmt.Printf("$%.4f %v\n", usd, ok)
	_, ok = table.Cost("someone-elses-model", 1, 1)
	fmt.Println(ok)
	// Output:
	// $0.3200 true
	// false
}
