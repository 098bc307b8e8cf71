package compactorsvc

import (
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// LLMConfig is llm.Config under a name that can be embedded beside
// provision.Config (the variables stay RECALL_LLM_*).
type LLMConfig = llm.Config

// Config configures the compactor service (environment variables RECALL_*).
// Zero values take the defaults of their tags (internal/envconf), so tests
// may build a literal — except FullCompact, which a literal leaves off.
type Config struct {
	NATS natsconn.Config
	provision.Config
	LLMConfig

	OpsAddr string `envconfig:"COMPACTOR_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`

	// FullCompact enables the LLM fallback when a compaction cannot be
	// served from session memory. The environment's default is on; a
	// Config literal leaves it off (false is its zero value), so a test or
	// an embedding turns the model on only when it means to.
	FullCompact bool `envconfig:"FULL_COMPACT" default:"true" desc:"when session memory cannot serve a compaction, summarize the conversation with the LLM provider (full_compact)"`

	WaitTimeout    time.Duration `envconfig:"COMPACTOR_WAIT_TIMEOUT" default:"15s" negative:"ok" desc:"default longest wait for a running extraction of the session (negative = never wait)"`
	StaleThreshold time.Duration `envconfig:"STALE_THRESHOLD" default:"60s" desc:"age after which a running extraction counts as gone and compactions stop waiting for it; shared with the extractor"`

	ContextWindow       int64 `envconfig:"COMPACTOR_CONTEXT_WINDOW" default:"200000" desc:"default context window; threshold = window - min(max output, 20000) - 13000"`
	MaxOutputTokens     int64 `envconfig:"COMPACTOR_MAX_OUTPUT_TOKENS" default:"20000" desc:"default max output tokens of the platform's model"`
	KeepMinTokens       int64 `envconfig:"COMPACTOR_KEEP_MIN_TOKENS" default:"10000" desc:"keep window: grow until at least this many tokens..."`
	KeepMinTextMessages int   `envconfig:"COMPACTOR_KEEP_MIN_TEXT_MESSAGES" default:"5" desc:"...and this many messages with text"`
	KeepMaxTokens       int64 `envconfig:"COMPACTOR_KEEP_MAX_TOKENS" default:"40000" desc:"keep window: stop growing at this many tokens"`
	SectionMaxChars     int   `envconfig:"COMPACTOR_SECTION_MAX_CHARS" default:"8000" desc:"note sections longer than this are cut (whole lines) in the summary"`

	Concurrency       int   `envconfig:"COMPACTOR_CONCURRENCY" default:"256" desc:"compactions and edits handled at once; more get a 503 busy error"`
	TenantConcurrency int   `envconfig:"COMPACTOR_TENANT_CONCURRENCY" default:"64" desc:"compactions and edits of one tenant handled at once; more get a 429 error with Retry-After, other tenants are still served"`
	MaxReadRecords    int   `envconfig:"COMPACTOR_MAX_READ_RECORDS" default:"50000" desc:"most transcript records read before the last summarized one (backwards growth, full compaction)"`
	TailCacheBytes    int64 `envconfig:"COMPACTOR_TAIL_CACHE_BYTES" default:"67108864" negative:"ok" desc:"decoded transcript records kept between compactions of a session, so the next one reads only what is new (negative = off)"`

	BreakerFailures     int           `envconfig:"COMPACTOR_BREAKER_FAILURES" default:"3" desc:"consecutive full-compaction failures of a session after which it is not tried again"`
	FullCompactTimeout  time.Duration `envconfig:"COMPACTOR_FULL_COMPACT_TIMEOUT" default:"120s" desc:"time limit of one full compaction (LLM call)"`
	FullCompactMaxChars int           `envconfig:"COMPACTOR_FULL_COMPACT_MAX_CHARS" default:"600000" desc:"most transcript characters sent to the model for a full compaction (newest kept)"`

	// Provider, when set, is used for full compaction instead of building
	// one from LLMConfig (tests).
	Provider llm.Provider `ignored:"true" json:"-"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags (internal/envconf) and
// derives the rest: a negative wait is no wait, a tenant bound at or above
// the replica's is none.
func (c Config) withDefaults() Config {
	full := c.FullCompact
	envconf.Defaults(&c)
	c.FullCompact = full
	c.WaitTimeout = max(c.WaitTimeout, 0) // negative: never wait
	if c.TenantConcurrency >= c.Concurrency {
		c.TenantConcurrency = 0 // no bound below the replica's own
	}
	return c
}
