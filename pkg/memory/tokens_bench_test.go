package memory_test

import (
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// BenchmarkEstimateMessage measures the reference token estimate of one
// realistic message (text, thinking, tool_use input, tool_result).
func BenchmarkEstimateMessage(b *testing.B) {
	g := benchgen.New(1)
	msgs := make([]events.Message, 1000)
	for i := range msgs {
		msgs[i] = g.Message("s000001")
	}
	b.ReportAllocs()
	var n int64
	for i := 0; b.Loop(); i++ {
		n += memory.EstimateMessage(&msgs[i%len(msgs)])
	}
	if n == 0 {
		b.Fatal("no tokens")
	}
}
