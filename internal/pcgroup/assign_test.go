package pcgroup

import (
	"fmt"
	"slices"
	"testing"
)

func TestAssignCoversEveryPartitionOnce(t *testing.T) {
	for _, tc := range []struct{ members, partitions int }{{1, 16}, {3, 16}, {4, 16}, {5, 64}, {16, 16}, {20, 16}} {
		t.Run(fmt.Sprintf("%d members %d partitions", tc.members, tc.partitions), func(t *testing.T) {
			var ms []string
			for i := 0; i < tc.members; i++ {
				ms = append(ms, fmt.Sprintf("worker-%d", i))
			}
			a := Assign(ms, tc.partitions)
			seen := map[int]string{}
			limit := (tc.partitions + tc.members - 1) / tc.members
			for m, ps := range a {
				if len(ps) > limit {
					t.Errorf("%s owns %d partitions, limit %d", m, len(ps), limit)
				}
				for _, p := range ps {
					if other, dup := seen[p]; dup {
						t.Fatalf("partition %d owned by %s and %s", p, other, m)
					}
					seen[p] = m
				}
			}
			if len(seen) != tc.partitions {
				t.Fatalf("%d partitions assigned, want %d", len(seen), tc.partitions)
			}
			// Same set in another order: same assignment.
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			b := Assign(rev, tc.partitions)
			for m := range a {
				if !slices.Equal(a[m], b[m]) {
					t.Fatalf("assignment depends on member order: %v vs %v", a, b)
				}
			}
		})
	}
}

func TestAssignMovesLittleOnJoin(t *testing.T) {
	ms := []string{"a", "b", "c", "d"}
	before := Assign(ms, 64)
	after := Assign(append(ms, "e"), 64)
	owner := func(a map[string][]int) map[int]string {
		o := map[int]string{}
		for m, ps := range a {
			for _, p := range ps {
				o[p] = m
			}
		}
		return o
	}
	ob, oa := owner(before), owner(after)
	moved := 0
	for p := range ob {
		if ob[p] != oa[p] {
			moved++
		}
	}
	// The newcomer needs about 64/5 ≈ 13; bounded load may shift a few more.
	if len(after["e"]) < 12 || moved > 24 {
		t.Fatalf("newcomer got %d partitions, %d moved", len(after["e"]), moved)
	}
}

func TestAssignEmpty(t *testing.T) {
	if a := Assign(nil, 8); len(a) != 0 {
		t.Fatalf("Assign(nil) = %v", a)
	}
}
