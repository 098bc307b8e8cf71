package extractortest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/memory"
)

func TestDetectorFlagsOverlap(t *testing.T) {
	d := NewDetector(&EditProvider{Delay: 50 * time.Millisecond})
	req := llm.Request{NotesPath: memory.NotesPath("acme", "s1")}
	other := llm.Request{NotesPath: memory.NotesPath("acme", "s2")}
	// Sequential calls and concurrent calls of distinct sessions are fine.
	for i := 0; i < 2; i++ {
		if _, err := d.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, r := range []llm.Request{req, other} {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = d.Complete(context.Background(), r) }()
	}
	wg.Wait()
	if o := d.Overlaps(); len(o) != 0 {
		t.Fatalf("false positives: %v", o)
	}
	// Two calls of one session at once are flagged.
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = d.Complete(context.Background(), req) }()
	}
	wg.Wait()
	if o := d.Overlaps(); len(o) != 1 {
		t.Fatalf("overlaps = %v, want one", o)
	}
	if d.Calls("acme", "s1") != 5 || d.Total() != 6 {
		t.Fatalf("calls s1 %d total %d", d.Calls("acme", "s1"), d.Total())
	}
}
