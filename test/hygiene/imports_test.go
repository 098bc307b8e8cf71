package hygiene

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPublicPackagesImportNoInternals: pkg/ is what platforms import; an
// import of internal/ from there is an arrow pointing up the layers.
func TestPublicPackagesImportNoInternals(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/recallhq/recall/pkg/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/recallhq/recall/internal/") || strings.HasPrefix(imp, "github.com/recallhq/recall/services/") {
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
}

// TestInternalPackagesImportNoServices: internal/ is what the services
// share; an import of services/ from there is an arrow pointing up the
// layers (internal/watch once imported the ingest service for its wire
// types, which live in pkg/events). Tests may start services.
func TestInternalPackagesImportNoServices(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/recallhq/recall/internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("only %d internal packages listed: the listing is broken", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/recallhq/recall/services/") {
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
}
