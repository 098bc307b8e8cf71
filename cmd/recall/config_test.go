package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/telemetry"
)

// recall config prints the shared variables once and each service's own
// under its name, and loses none.
func TestConfigPrintsSharedOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"config"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, key := range []string{"RECALL_NATS_URL ", "RECALL_PARTITIONS ", "RECALL_LLM_PROVIDER ", "RECALL_LOG_LEVEL "} {
		if n := strings.Count(got, "\n"+key); n != 1 {
			t.Errorf("%s printed %d times", key, n)
		}
	}
	for _, h := range []string{"# shared by every service\nRECALL_NATS_URL", "# ingest\n", "# longterm\n"} {
		if !strings.Contains(got, h) {
			t.Errorf("no %q", h)
		}
	}
	specs := []any{&telemetry.Config{}}
	for _, s := range configSpecs {
		specs = append(specs, s.spec)
	}
	for _, spec := range specs {
		lines, err := configLines(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if key, _, _ := strings.Cut(l, "\t"); !strings.Contains(got, "\n"+key+" ") {
				t.Errorf("%s is missing", key)
			}
		}
	}
	if n := strings.Count(got, "\n"); n > 180 {
		t.Errorf("%d lines", n)
	}
}
