package longtermsvc

import (
	"testing"

	"github.com/kelseyhightower/envconfig"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags).
func TestDefaultsFromTags(t *testing.T) {
	var env Config
	if err := envconfig.Process("RECALL_DEFAULTS_TEST_UNSET", &env); err != nil {
		t.Fatal(err)
	}
	lit := Config{}.withDefaults()
	env.ID, env.Provider = lit.ID, lit.Provider
	if lit.LogValue().String() != env.LogValue().String() {
		t.Fatalf("literal defaults %v\nenvironment's %v", lit.LogValue(), env.LogValue())
	}
	if lit.Partitions != 16 || lit.Concurrency != 4 || lit.ID == "" {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
}
