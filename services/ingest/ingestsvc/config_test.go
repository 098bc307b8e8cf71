package ingestsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/envconf/envconftest"
	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/indexer/indexersvc"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags) — but for the retention sweeper, which a literal
// runs only when it sets an interval — what is derived is derived, and the
// token hashes are logged masked.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	if env.Retention.Interval != 10*time.Minute || lit.Retention.Interval != 0 {
		t.Fatalf("retention sweep: environment every %v, literal every %v; want 10m, none", env.Retention.Interval, lit.Retention.Interval)
	}
	env.Retention = lit.Retention
	envconftest.SameDefaults(t, lit, env)
	if lit.Erase.TombstoneTTL != 24*time.Hour || lit.Erase.Drain != 500*time.Millisecond || lit.TenantInFlight != 256 || lit.ShutdownGrace != 30*time.Second {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
	if c := (Config{MaxEventBytes: 32 << 20, MaxBodyBytes: 1 << 20}).withDefaults(); c.MaxBodyBytes != 32<<20+1<<10 {
		t.Fatalf("a body limit below one event of the largest size: %d", c.MaxBodyBytes)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config",
		Config{Tenants: "acme:" + HashToken("tok-a"), OperatorTokens: HashToken("tok-op")}.withDefaults())
	out := buf.String()
	if strings.Contains(out, HashToken("tok-a")) || strings.Contains(out, HashToken("tok-op")) || !strings.Contains(out, "config.tenants=***") {
		t.Fatalf("token hashes not masked: %s", out)
	}
}

// TestPricesSharedWithIndexer: the console's prices are the indexer's
// variable, declared alike (key, default, description), so an operator
// sets RECALL_INDEX_PRICES once and `recall config` lists it once, shared.
func TestPricesSharedWithIndexer(t *testing.T) {
	own, _ := reflect.TypeFor[Config]().FieldByName("Prices")
	idx, _ := reflect.TypeFor[indexersvc.Config]().FieldByName("Prices")
	if own.Tag != idx.Tag || own.Tag.Get("envconfig") != "INDEX_PRICES" {
		t.Fatalf("ingest's Prices is tagged %s, the indexer's %s", own.Tag, idx.Tag)
	}
}

// TestBadPricesRefusedAtStart: a malformed RECALL_INDEX_PRICES stops the
// start, before NATS is dialled, with an error naming the variable and
// the entry at fault.
func TestBadPricesRefusedAtStart(t *testing.T) {
	for _, c := range []struct{ spec, entry string }{
		{"claude-haiku-4-5=1", `"claude-haiku-4-5=1" is not model=input:output`},
		{"my-model=1:x", `"my-model=1:x": prices must be`},
		{"gpt-4o-mini=0.15:0.6, my-model=-1:2", `"my-model=-1:2"`},
		{"my-model=NaN:1", `"my-model=NaN:1"`},
	} {
		t.Run(c.spec, func(t *testing.T) {
			cfg := Config{NATS: natsconn.Config{URL: "nats://127.0.0.1:1"}, Prices: c.spec}
			_, err := Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if !errors.Is(err, prices.ErrInvalid) || !strings.HasPrefix(err.Error(), "configuration: RECALL_INDEX_PRICES: invalid price: ") ||
				!strings.Contains(err.Error(), c.entry) {
				t.Fatalf("Start: %v", err)
			}
		})
	}
}

// TestConsolePricedByConfig: the console of the edge prices a session's
// memory with RECALL_INDEX_PRICES over the built-in table.
func TestConsolePricedByConfig(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.Prices = "test-model=2:10" })
	if status, _, body := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("p1", "s1"))); status != http.StatusAccepted {
		t.Fatalf("posting an event: %d %s", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	rec := events.MemoryRecord{Notes: "n", Extractions: 1, Model: "test-model", CoveredSeq: 1,
		Usage: events.TokenUsage{InputTokens: 1000, OutputTokens: 100}}
	if _, err := kv.Put(ctx, events.MemoryKey("acme", "s1"), mustMarshal(t, rec)); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/console/api/tenants/acme/sessions/s1", nil)
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Memory *struct {
			CostUSD *float64 `json:"cost_usd"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("session page: %d %v", resp.StatusCode, err)
	}
	if want := (1000*2 + 100*10) / 1e6; page.Memory == nil || page.Memory.CostUSD == nil || math.Abs(*page.Memory.CostUSD-want) > 1e-12 {
		t.Fatalf("the memory's cost: %+v, want %v at the configured price", page.Memory, want)
	}
}
