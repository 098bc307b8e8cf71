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
	}
}
