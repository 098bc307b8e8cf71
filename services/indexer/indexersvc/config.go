package indexersvc

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
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
	// TenantMax caps what tenants set (RECALL_TENANT_MAX_*, the same
	// variables the configuration API refuses values over): a stored
	// query_max_budget_tokens above the ceiling is capped at use.
	TenantMax tenantcfg.Ceilings `envconfig:"TENANT_MAX"`

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

// price is USD per million tokens (the shared table's).
type price = prices.Price

// parsePrices reads INDEX_PRICES ("model=in:out,...") over the built-in
// table (internal/llm/prices, which the console prices extractions with).
func parsePrices(spec string) (map[string]price, error) {
	t, err := prices.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("RECALL_INDEX_PRICES: %w", err)
	}
	return t, nil
}

// cost prices input and output tokens for model: an exact entry, else the
// longest entry that prefixes the model name (dated model versions); 0 when
// none.
func cost(table map[string]price, model string, in, out int64) float64 {
	usd, _ := prices.Table(table).Cost(model, in, out)
	return usd
}
