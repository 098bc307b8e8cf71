package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/recallhq/recall/cmd/recall/internal/bench"
)

// TestQuickGatewayKeys: a quick gateway run reports every gateway key of
// the issue as a number (compactions answered from memory, not skipped).
func TestQuickGatewayKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Options{Quick: true, Only: []string{bench.ScenarioGateway}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"gateway.overhead_p50_ms", "gateway.overhead_p99_ms", "gateway.ttfb_overhead_p50_ms", "gateway.compact_p99_ms", "gateway.cpu_us_per_request", "gateway.compact_cpu_us", "gateway.compact_floor_cpu_us"} {
		if v, _ := lookup(m, k); v == nil {
			t.Errorf("%s is not measured (progress:\n%s)", k, progress.String())
		} else if _, ok := v.(float64); !ok {
			t.Errorf("%s = %v, want a number", k, v)
		}
	}
}
