package memory_test

import (
	"fmt"
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// BenchmarkSelectWindow measures keep-window selection over a realistic
// transcript suffix, with the last summarized record n/4 from the end.
func BenchmarkSelectWindow(b *testing.B) {
	for _, n := range []int{64, 512, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := benchgen.New(1)
			msgs := make([]events.Message, n)
			es := make([]memory.WindowEntry, n)
			for i := range es {
				msgs[i] = g.Message("s000001")
				es[i] = memory.WindowEntry{Seq: uint64(i + 1), Message: &msgs[i]}
			}
			in := memory.WindowInput{Entries: es, Start: n - n/4, Complete: true}
			cfg := memory.DefaultWindowConfig()
			b.ReportAllocs()
			for b.Loop() {
				_ = memory.SelectWindow(in, cfg)
			}
		})
	}
}
