package memory_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure keeps pkg/memory free of infrastructure: no NATS, no environment
// configuration, no telemetry SDK. The domain must stay testable and
// deterministic without servers.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/recallhq/recall/pkg/memory").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/nats-io/", "github.com/kelseyhightower/envconfig", "go.opentelemetry.io/otel/sdk", "net/http"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("pkg/memory depends on %s", dep)
			}
		}
	}
}
