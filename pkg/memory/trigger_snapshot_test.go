package memory

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// A state encoded at any record and decoded again is the same state, and
// goes on to the same decisions as the one that was never encoded.
func TestTriggerStateSnapshotRoundTrip(t *testing.T) {
	th := Thresholds{MinimumMessageTokensToInit: 3000, MinimumTokensBetweenUpdate: 1500, ToolCallsBetweenUpdates: 2, QuietPeriod: 2 * time.Second}
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		recs := randomTranscript(rng, 300)
		for _, cut := range []int{1, rng.IntN(len(recs)), rng.IntN(len(recs)), len(recs) - 1} {
			var whole TriggerState
			var wantDecisions, gotDecisions []TriggerDecision
			for _, r := range recs[:cut] {
				wantDecisions = whole.Observe(r, &th, wantDecisions)
			}
			b, err := whole.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var restored TriggerState
			if err := restored.UnmarshalBinary(b); err != nil {
				t.Fatalf("seed %d cut %d: %v", seed, cut, err)
			}
			if !reflect.DeepEqual(whole, restored) {
				t.Fatalf("seed %d cut %d: encoded\n%+v\ndecoded\n%+v", seed, cut, whole, restored)
			}
			gotDecisions = append(gotDecisions, wantDecisions...)
			for _, r := range recs[cut:] {
				wantDecisions = whole.Observe(r, &th, wantDecisions)
				gotDecisions = restored.Observe(r, &th, gotDecisions)
			}
			if !reflect.DeepEqual(wantDecisions, gotDecisions) || !reflect.DeepEqual(whole, restored) {
				t.Fatalf("seed %d cut %d: the restored state decided differently", seed, cut)
			}
		}
	}
}

func TestTriggerStateSnapshotRefusesGarbage(t *testing.T) {
	var s TriggerState
	s.Observe(TriggerRecord{Seq: 3, Kind: RecMessage, Main: true, Assistant: true, MessageID: "m1", UUID: "u-1", Time: 5, Estimate: 10}, &Thresholds{}, nil)
	good, _ := s.MarshalBinary()
	for _, b := range [][]byte{nil, {}, {9}, good[:len(good)-1], append(append([]byte(nil), good...), 0)} {
		before := s
		if err := s.UnmarshalBinary(b); !errors.Is(err, ErrTriggerState) {
			t.Fatalf("%v decoded: %v", b, err)
		}
		if !reflect.DeepEqual(before, s) {
			t.Fatalf("a refused snapshot changed the state")
		}
	}
}
