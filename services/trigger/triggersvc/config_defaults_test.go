package triggersvc

import (
	"testing"

	"github.com/recallhq/recall/internal/envconf/envconftest"
	"github.com/recallhq/recall/pkg/memory"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags), and the threshold defaults are the reference's.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.WithDefaults()
	env.MemberID = lit.MemberID
	if lit != env {
		t.Fatalf("literal defaults %+v\nenvironment's %+v", lit, env)
	}
	if lit.MinTokensToInit != memory.DefaultMinimumMessageTokensToInit || lit.MinTokensBetweenUpdate != memory.DefaultMinimumTokensBetweenUpdate ||
		lit.ToolCallsBetweenUpdates != memory.DefaultToolCallsBetweenUpdates || lit.ResponseQuietPeriod != memory.DefaultQuietPeriod {
		t.Fatalf("threshold defaults differ from the reference's: %+v", lit.Thresholds())
	}
	if neg := (Config{WarmStartRecords: -1, SnapshotEvery: -1}).WithDefaults(); neg.WarmStartRecords != -1 || neg.SnapshotEvery != -1 {
		t.Fatal("a negative warm-start or snapshot setting (never) was replaced")
	}
}
