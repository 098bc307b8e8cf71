package erase

import (
	"testing"
	"time"

	"github.com/recallhq/recall/internal/envconf/envconftest"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags); a negative drain is no wait.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	if lit := (Config{}).withDefaults(); lit != env {
		t.Fatalf("literal defaults %+v, environment's %+v", lit, env)
	}
	if env.TombstoneTTL != 24*time.Hour || env.Drain != 500*time.Millisecond {
		t.Fatalf("defaults: %+v", env)
	}
	if c := (Config{Drain: -1}).withDefaults(); c.Drain != 0 {
		t.Fatalf("a negative drain became %v, want no wait", c.Drain)
	}
}
