package indexersvc

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// LLMConfig is llm.Config under a name that can be embedded beside
// provision.Config (the variables stay RECALL_LLM_*).
type LLMConfig = llm.Config

// Config configures the indexer (environment variables RECALL_*). Zero
// values take the defaults below, so tests may build a literal.
type Config struct {
	NATS natsconn.Config
	provision.Config
	LLMConfig

	OpsAddr string `envconfig:"INDEXER_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`
	// MemberID names the replica in the indexers' shard group.
	MemberID string `envconfig:"INDEXER_MEMBER_ID" desc:"this replica's id in the indexers' shard group (default: hostname + random suffix)"`

	// IndexModel overrides RECALL_LLM_MODEL for indexing and questions (a
	// cheap model is enough).
	IndexModel         string        `envconfig:"INDEX_MODEL" desc:"model for indexing and questions to past sessions; empty uses RECALL_LLM_MODEL"`
	MinNewUserMessages int           `envconfig:"INDEX_MIN_NEW_USER_MESSAGES" default:"5" desc:"user requests after the last indexing before a turn end indexes a session again (tenants may override)"`
	MaxInputBytes      int           `envconfig:"INDEX_MAX_INPUT_BYTES" default:"51200" desc:"most conversation bytes an indexing reads (the most recent kept)"`
	Concurrency        int           `envconfig:"INDEX_CONCURRENCY" default:"4" desc:"indexings run at once (one at a time per session)"`
	Timeout            time.Duration `envconfig:"INDEX_TIMEOUT" default:"120s" desc:"time limit of one indexing or question"`
	Prices             string        `envconfig:"INDEX_PRICES" desc:"USD per million input:output tokens by model, e.g. \"claude-haiku-4-5=1:5,gpt-4o-mini=0.15:0.6\" (added to the built-in table)"`
	QueryBudgetTokens  int64         `envconfig:"QUERY_BUDGET_TOKENS" default:"30000" desc:"most session tokens sent with a question to a past session"`
	ReindexWait        time.Duration `envconfig:"INDEX_REINDEX_WAIT" default:"60s" desc:"how long a forced indexing waits for a running one of the same session"`

	// Fairness bounds (docs/sessions.md, "Bounds and fairness").
	QueryMaxBudgetTokens int64 `envconfig:"QUERY_MAX_BUDGET_TOKENS" default:"50000" desc:"most session tokens one request may send to the model (a larger budget_tokens is capped; tenants may override with query_max_budget_tokens)"`
	ResolveMaxRefs       int   `envconfig:"RESOLVE_MAX_REFS" default:"20" desc:"most @@references one resolve request may hold (more is refused with 400)"`
	TenantRequests       int   `envconfig:"INDEX_TENANT_REQUESTS" default:"4" desc:"reindex, resolve and query requests one tenant may have in flight on a replica (429 with Retry-After beyond)"`
	Requests             int   `envconfig:"INDEX_REQUESTS" default:"16" desc:"reindex, resolve and query requests in flight on a replica, all tenants (503 with Retry-After beyond)"`
	ReadBatch            int   `envconfig:"INDEX_READ_BATCH" default:"32" desc:"transcript records fetched per round trip on the indexer's read connection"`

	// Provider, when set, is used instead of building one from LLMConfig
	// (tests).
	Provider llm.Provider `ignored:"true" json:"-"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags (internal/envconf).
func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	return c
}

// Defaults of the fairness bounds.
const (
	DefaultQueryMaxBudgetTokens = 50000
	DefaultResolveMaxRefs       = 20
)

// price is USD per million tokens.
type price struct{ in, out float64 }

// defaultPrices are list prices of common cheap models (USD per million
// input and output tokens); INDEX_PRICES adds to and overrides them.
var defaultPrices = map[string]price{
	"claude-haiku-4-5":  {1, 5},
	"claude-3-5-haiku":  {0.8, 4},
	"claude-sonnet-4-5": {3, 15},
	"gpt-4o-mini":       {0.15, 0.6},
	"gpt-4.1-mini":      {0.4, 1.6},
	"gpt-4.1-nano":      {0.1, 0.4},
	"gemini-2.5-flash":  {0.3, 2.5},
	llm.OfflineModel:    {0, 0},
}

// parsePrices reads INDEX_PRICES ("model=in:out,...") over the defaults.
func parsePrices(spec string) (map[string]price, error) {
	out := make(map[string]price, len(defaultPrices))
	for k, v := range defaultPrices {
		out[k] = v
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, rates, ok := strings.Cut(item, "=")
		in, outS, ok2 := strings.Cut(rates, ":")
		if !ok || !ok2 || strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("RECALL_INDEX_PRICES: %q is not model=input:output", item)
		}
		pin, err1 := strconv.ParseFloat(strings.TrimSpace(in), 64)
		pout, err2 := strconv.ParseFloat(strings.TrimSpace(outS), 64)
		if err1 != nil || err2 != nil || pin < 0 || pout < 0 {
			return nil, fmt.Errorf("RECALL_INDEX_PRICES: %q: prices must be non-negative numbers (USD per million tokens)", item)
		}
		out[strings.TrimSpace(model)] = price{pin, pout}
	}
	return out, nil
}

// cost prices input and output tokens for model: an exact entry, else the
// longest entry that prefixes the model name (dated model versions); 0 when
// none.
func cost(prices map[string]price, model string, in, out int64) float64 {
	p, ok := prices[model]
	if !ok {
		best := ""
		for k := range prices {
			if strings.HasPrefix(model, k) && len(k) > len(best) {
				best, p, ok = k, prices[k], true
			}
		}
	}
	if !ok {
		return 0
	}
	return (float64(in)*p.in + float64(out)*p.out) / 1e6
}
