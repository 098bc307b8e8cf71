package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// TestServiceCommandsHelp: each service command answers -h with its
// configuration help instead of starting (no NATS is running here, so a
// start would retry until the context ends).
func TestServiceCommandsHelp(t *testing.T) {
	want := map[string]string{
		"ingest":    "RECALL_HTTP_ADDR",
		"trigger":   "RECALL_TRIGGER_",
		"extractor": "RECALL_EXTRACTOR_OPS_ADDR",
		"compactor": "RECALL_COMPACTOR_OPS_ADDR",
	}
	for name, variable := range want {
		for _, h := range []string{"-h", "--help"} {
			t.Run(name+h, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var out bytes.Buffer
				err := run(ctx, []string{name, h}, &out)
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want flag.ErrHelp", err)
				}
				if ctx.Err() != nil {
					t.Fatal("the service started instead of printing help")
				}
				for _, s := range []string{"Usage: recall " + name, "RECALL_NATS_URL", "RECALL_PARTITIONS", variable, "RECALL_LOG_LEVEL"} {
					if !strings.Contains(out.String(), s) {
						t.Errorf("help lacks %s:\n%s", s, out.String())
					}
				}
			})
		}
	}
	if err := run(context.Background(), []string{"extractor", "stray"}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
		t.Fatalf("stray argument: %v, want a usage error", err)
	}
}
