package eval

import (
	"bytes"
	"context"
	"testing"
)

// A run with the in-process baselines only: every session is scored by
// both, and the table prints.
func TestRunBaselines(t *testing.T) {
	rep, err := Run(context.Background(), Options{Seed: 1, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := PrintTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	for _, sys := range []string{SysTruncation, SysReference} {
		r := rep.Result(sys)
		if r == nil || r.Overall.Total != rep.Facts {
			t.Fatalf("%s: %+v, want %d facts scored", sys, r, rep.Facts)
		}
		// The quick sessions: one without, one after an earlier compaction.
		if f, c := r.Bands[BandFresh], r.Bands[BandCompacted]; f.Total == 0 || c.Total == 0 || f.Total+c.Total != rep.Facts {
			t.Fatalf("%s: bands %+v", sys, r.Bands)
		}
	}
}
