package eval

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
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

// RunFamilies reports the first family at the top and the others under
// Families, each on its own sessions.
func TestRunFamilies(t *testing.T) {
	rep, err := RunFamilies(context.Background(), Options{Seed: 1, Quick: true}, sessiongen.Families)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{rep.Family}
	for _, f := range rep.Families {
		got = append(got, f.Family)
	}
	if !slices.Equal(got, sessiongen.Families) {
		t.Fatalf("families %v, want %v", got, sessiongen.Families)
	}
	if rep.Sessions[0].ID == rep.Families[0].Sessions[0].ID {
		t.Fatalf("both families have session %s", rep.Sessions[0].ID)
	}
	var b bytes.Buffer
	if err := PrintTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range sessiongen.Families {
		if !strings.Contains(b.String(), "family "+f) {
			t.Fatalf("the table does not name family %s:\n%s", f, b.String())
		}
	}
}
