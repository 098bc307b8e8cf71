package compactorsvc

import (
	"testing"
	"time"

	"github.com/recallhq/recall/internal/envconf/envconftest"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags) — but for FullCompact, which a literal leaves off
// — and the defaults that are constants elsewhere agree with them.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	if !env.FullCompact || lit.FullCompact {
		t.Fatalf("full compaction: environment %v, literal %v; want on, off", env.FullCompact, lit.FullCompact)
	}
	env.FullCompact = lit.FullCompact
	envconftest.SameDefaults(t, lit, env)
	w := memory.DefaultWindowConfig()
	for name, c := range map[string][2]int64{
		"stale threshold":        {int64(lit.StaleThreshold), int64(events.DefaultStaleThreshold)},
		"context window":         {lit.ContextWindow, memory.DefaultContextWindow},
		"max output tokens":      {lit.MaxOutputTokens, memory.DefaultMaxOutputTokens},
		"keep min tokens":        {lit.KeepMinTokens, w.MinTokens},
		"keep min text messages": {int64(lit.KeepMinTextMessages), int64(w.MinTextMessages)},
		"keep max tokens":        {lit.KeepMaxTokens, w.MaxTokens},
		"section max chars":      {int64(lit.SectionMaxChars), memory.DefaultSectionMaxChars},
	} {
		if c[0] != c[1] {
			t.Errorf("%s: tag default %d, constant %d", name, c[0], c[1])
		}
	}
	neg := Config{WaitTimeout: -1, TailCacheBytes: -1, TenantConcurrency: 8, Concurrency: 8}.withDefaults()
	if neg.WaitTimeout != 0 || neg.TailCacheBytes != -1 || neg.TenantConcurrency != 0 {
		t.Fatalf("derived: wait %v (negative: never), tail cache %d (negative: off), tenant bound %d (at the replica's: none)",
			neg.WaitTimeout, neg.TailCacheBytes, neg.TenantConcurrency)
	}
	if lit.WaitTimeout != 15*time.Second || lit.Concurrency != 256 || lit.TenantConcurrency != 64 {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
}
