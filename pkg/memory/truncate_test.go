package memory_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/memory"
)

func TestTruncateForCompactGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/truncate/*.md")
	if len(files) == 0 {
		t.Fatal("no inputs in testdata/truncate")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".md")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out, truncated := memory.TruncateForCompact(string(in), 0)
			checkTruncation(t, string(in), out, truncated, memory.DefaultSectionMaxChars)
			got := fmt.Sprintf("truncated: %v\n----\n%s", truncated, out)
			golden := strings.TrimSuffix(file, ".md") + ".golden"
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("truncation of %s differs from %s (go test -update rewrites it)", file, golden)
			}
		})
	}
}

// checkTruncation asserts the contract: same headers and descriptions, kept
// lines are whole lines of the input, bodies fit, the marker only where cut.
func checkTruncation(t *testing.T, in, out string, truncated bool, max int) {
	t.Helper()
	pin, sin := memory.Parse(in)
	pout, sout := memory.Parse(out)
	if pin != pout || len(sin) != len(sout) {
		t.Fatalf("preamble or section count changed")
	}
	cut := false
	for i := range sin {
		if sin[i].Header != sout[i].Header || sin[i].Description != sout[i].Description {
			t.Fatalf("section %d header or description changed", i)
		}
		if sin[i].Body == sout[i].Body {
			if len([]rune(sin[i].Body)) > max {
				t.Fatalf("section %q over %d characters was not cut", sin[i].Header, max)
			}
			continue
		}
		cut = true
		kept, marker, ok := strings.Cut(sout[i].Body, memory.TruncationMarker)
		if !ok {
			t.Fatalf("section %q was cut without the marker", sin[i].Header)
		}
		if strings.TrimSpace(marker) != "" {
			t.Fatalf("text after the marker in %q: %q", sin[i].Header, marker)
		}
		if !strings.HasPrefix(sin[i].Body, kept) || (kept != "" && !strings.HasSuffix(kept, "\n")) {
			t.Fatalf("section %q kept text is not a run of whole lines of the input", sin[i].Header)
		}
		if len([]rune(kept)) > max {
			t.Fatalf("section %q keeps %d characters, over %d", sin[i].Header, len([]rune(kept)), max)
		}
	}
	if cut != truncated {
		t.Fatalf("truncated = %v, but sections cut = %v", truncated, cut)
	}
}

func TestTruncateForCompactBoundary(t *testing.T) {
	doc := func(n int) string { return "# S\n_d_\n" + strings.Repeat("a", n-1) + "\n" }
	for _, tc := range []struct {
		body int
		cut  bool
	}{{8000, false}, {8001, true}} {
		out, truncated := memory.TruncateForCompact(doc(tc.body), 0)
		if truncated != tc.cut {
			t.Errorf("body of %d characters: truncated = %v, want %v", tc.body, truncated, tc.cut)
		}
		checkTruncation(t, doc(tc.body), out, truncated, 8000)
	}
	// Characters are UTF-16 units: 4,000 astral runes are 8,000 units.
	astral := "# S\n_d_\n" + strings.Repeat("😀", 4000) + "\n"
	if _, truncated := memory.TruncateForCompact(astral, 0); !truncated {
		t.Error("8,001 UTF-16 units were not cut")
	}
}
