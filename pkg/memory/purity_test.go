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
	// Tests run under the go command, which puts its own bin directory
	// first on PATH; a missing go is a broken setup, not a reason to skip.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list pkg/memory's dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/recallhq/recall/pkg/memory").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps pkg/memory: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/nats-io/", "github.com/kelseyhightower/envconfig", "go.opentelemetry.io/otel/sdk", "net/http"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("pkg/memory depends on %s", dep)
			}
		}
	}
}
