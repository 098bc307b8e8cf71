package longtermsvc

import (
	"testing"

	"github.com/recallhq/recall/internal/envconf/envconftest"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags).
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	env.ID, env.Provider = lit.ID, lit.Provider
	envconftest.SameDefaults(t, lit, env)
	if lit.Partitions != 16 || lit.Concurrency != 4 || lit.ID == "" {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
}
