package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/cmd/recall/internal/bench"
)

// issueKeys are the keys issues #7 and #32 require, as paths into the JSON
// object.
var issueKeys = []string{
	"raw.js_publish_msgs_per_s", "raw.js_consume_msgs_per_s",
	"raw.request_reply_p50_us", "raw.request_reply_p99_us", "raw.kv_get_p99_us",
	"ingest.nats_events_per_s", "ingest.http_batch_events_per_s",
	"ingest.ratio_nats_vs_raw", "ingest.ratio_http_vs_raw", "ingest.cpu_ratio_vs_raw",
	"trigger.events_per_s", "trigger.sessions", "trigger.ratio_vs_raw_consume", "trigger.bytes_per_session",
	"trigger.cpu_ratio_vs_raw", "trigger.replicas_scaling",
	"compaction.by_size", "compaction.ratio_p99_vs_raw", "compaction.flatness", "compaction.concurrent",
	"extraction.scaling", "extraction.ordering_violations",
	"pipeline.trigger_lag_p99_ms", "pipeline.trigger_lag_80_p99_ms", "pipeline.raw_lag_80_p99_ms", "pipeline.raw_lag_at_recall_80_p99_ms",
	"pipeline.cpu_ratio_vs_raw", "pipeline.trigger_lag_80_p99_vs_raw",
}

func lookup(m map[string]any, path string) (any, bool) {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestQuickRawShape runs the cheapest scenario in quick mode on an embedded
// server and checks the JSON shape: every key of the issue is present, the
// measured ones are numbers, the others null with a skip reason. It asserts
// no values.
func TestQuickRawShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Options{Quick: true, Only: []string{bench.ScenarioRaw}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range issueKeys {
		v, ok := lookup(m, k)
		if !ok {
			t.Errorf("key %s missing from %s", k, b)
			continue
		}
		if strings.HasPrefix(k, "raw.") {
			if _, isNum := v.(float64); !isNum {
				t.Errorf("%s = %v, want a number (the raw scenario ran; progress:\n%s)", k, v, progress.String())
			}
		}
	}
	for _, group := range []string{"ingest", "trigger", "compaction", "extraction", "pipeline"} {
		if r, _ := lookup(m, group+".skipped"); r == nil || r == "" {
			t.Errorf("%s.skipped is empty although the scenario did not run", group)
		}
	}
	if v, _ := lookup(m, "ingest.nats_events_per_s"); v != nil {
		t.Errorf("ingest.nats_events_per_s = %v for a scenario that did not run, want null", v)
	}
	if tg, _ := m["targets"].([]any); len(tg) == 0 {
		t.Errorf("no targets in %s", b)
	}
	var table bytes.Buffer
	if err := bench.PrintTable(&table, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "raw.js_publish") {
		t.Errorf("table lacks the raw rows:\n%s", table.String())
	}
}

func TestUnknownScenario(t *testing.T) {
	_, err := bench.Run(context.Background(), bench.Options{Quick: true, Only: []string{"nope"}})
	if !errors.Is(err, bench.ErrUnknownScenario) {
		t.Fatalf("err = %v, want ErrUnknownScenario", err)
	}
}

// TestQuickTriggerShards runs the trigger scenario in quick mode: every
// replica count of trigger.replicas_scaling is measured, one replica
// receives every record once, and with more replicas the busiest receives
// a share near 1/replicas (the replicas read only their shards; a replica
// that read every shard would receive them all). The CPU numbers are
// measured on both sides of their ratio.
func TestQuickTriggerShards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trigger scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Options{Quick: true, Only: []string{bench.ScenarioTrigger}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Trigger
	if r.Skipped != "" {
		t.Fatalf("trigger skipped: %s\n%s", r.Skipped, progress.String())
	}
	var replicas []int
	for _, s := range r.ReplicasScaling {
		replicas = append(replicas, s.Replicas)
		// Quick runs hash 2,000 sessions over the shards: twice the
		// target's slack covers their unevenness.
		if bound := 1 + 0.2*float64(s.Replicas-1); s.DeliveredFraction > bound/float64(s.Replicas) || s.DeliveredFraction < 1/float64(s.Replicas) {
			t.Errorf("%d replicas: the busiest received %.3f of the records, want about 1/%d", s.Replicas, s.DeliveredFraction, s.Replicas)
		}
	}
	if fmt.Sprint(replicas) != "[1 2 4]" {
		t.Errorf("replica counts %v, want [1 2 4]", replicas)
	}
	if r.CPUUSPerEvent == nil || r.RawCPUUSPerEvent == nil || r.CPURatioVsRaw == nil || *r.RawCPUUSPerEvent <= 0 {
		t.Errorf("CPU per event: trigger %v, raw %v, ratio %v; want all measured", r.CPUUSPerEvent, r.RawCPUUSPerEvent, r.CPURatioVsRaw)
	}
	if t.Failed() {
		t.Log(progress.String())
	}
}

// TestQuickCompactionConcurrent runs the compaction scenario in quick mode:
// compaction.concurrent is measured on both sides of its ratios, every
// request is accounted for, and the step beyond the compactor's per-tenant
// share (96 at once, share 64) is refused in part with 429.
func TestQuickCompactionConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compaction scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Options{Quick: true, Only: []string{bench.ScenarioCompaction}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Compaction
	if r.Skipped != "" || r.Concurrent == nil || r.ConcurrentOverShare == nil {
		t.Fatalf("compaction skipped (%q) or concurrent steps missing\n%s", r.Skipped, progress.String())
	}
	for _, c := range []*bench.ConcurrentCompaction{r.Concurrent, r.ConcurrentOverShare} {
		if c.Served+c.Refused429 != c.Requests || c.CompactionsPerS <= 0 || c.FloorPerS <= 0 || c.RateVsFloor <= 0 || c.P99VsFloor <= 0 {
			t.Errorf("%d at once: %+v; want every request served or refused and both sides measured", c.Concurrency, *c)
		}
	}
	if r.Concurrent.Refused429 != 0 {
		t.Errorf("%d at once (within the share): %d refused", r.Concurrent.Concurrency, r.Concurrent.Refused429)
	}
	if r.ConcurrentOverShare.Refused429 == 0 {
		t.Errorf("%d at once (over the share of 64): none refused", r.ConcurrentOverShare.Concurrency)
	}
	if t.Failed() {
		t.Log(progress.String())
	}
}
