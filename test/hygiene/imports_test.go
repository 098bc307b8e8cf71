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
