package compactorsvc

import (
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// LLMConfig is llm.Config under a name that can be embedded beside
// provision.Config (the variables stay RECALL_LLM_*).
type LLMConfig = llm.Config

// Config configures the compactor service (environment variables RECALL_*).
// Zero values take the defaults below, so tests may build a literal.
type Config struct {
	NATS natsconn.Config
	provision.Config
	LLMConfig

	OpsAddr string `envconfig:"COMPACTOR_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`

	// FullCompact enables the LLM fallback when a compaction cannot be
	// served from session memory.
	FullCompact bool `envconfig:"FULL_COMPACT" default:"true" desc:"when session memory cannot serve a compaction, summarize the conversation with the LLM provider (full_compact)"`

	WaitTimeout    time.Duration `envconfig:"COMPACTOR_WAIT_TIMEOUT" default:"15s" desc:"default longest wait for a running extraction of the session (negative = never wait)"`
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
	TailCacheBytes    int64 `envconfig:"COMPACTOR_TAIL_CACHE_BYTES" default:"67108864" desc:"decoded transcript records kept between compactions of a session, so the next one reads only what is new (negative = off)"`

	BreakerFailures     int           `envconfig:"COMPACTOR_BREAKER_FAILURES" default:"3" desc:"consecutive full-compaction failures of a session after which it is not tried again"`
	FullCompactTimeout  time.Duration `envconfig:"COMPACTOR_FULL_COMPACT_TIMEOUT" default:"120s" desc:"time limit of one full compaction (LLM call)"`
	FullCompactMaxChars int           `envconfig:"COMPACTOR_FULL_COMPACT_MAX_CHARS" default:"600000" desc:"most transcript characters sent to the model for a full compaction (newest kept)"`

	// Provider, when set, is used for full compaction instead of building
	// one from LLMConfig (tests).
	Provider llm.Provider `ignored:"true" json:"-"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("nats", c.NATS),
		slog.Any("llm", c.LLMConfig),
		slog.String("ops_addr", c.OpsAddr),
		slog.Bool("full_compact", c.FullCompact),
		slog.Duration("wait_timeout", c.WaitTimeout),
		slog.Duration("stale_threshold", c.StaleThreshold),
		slog.Int64("context_window", c.ContextWindow),
		slog.Int64("max_output_tokens", c.MaxOutputTokens),
		slog.Int64("keep_min_tokens", c.KeepMinTokens),
		slog.Int("keep_min_text_messages", c.KeepMinTextMessages),
		slog.Int64("keep_max_tokens", c.KeepMaxTokens),
		slog.Int("concurrency", c.Concurrency),
		slog.Int("tenant_concurrency", c.TenantConcurrency),
	)
}

func (c Config) withDefaults() Config {
	switch {
	case c.WaitTimeout == 0:
		c.WaitTimeout = 15 * time.Second
	case c.WaitTimeout < 0: // never wait
		c.WaitTimeout = 0
	}
	if c.StaleThreshold <= 0 {
		c.StaleThreshold = events.DefaultStaleThreshold
	}
	if c.ContextWindow <= 0 {
		c.ContextWindow = memory.DefaultContextWindow
	}
	if c.MaxOutputTokens <= 0 {
		c.MaxOutputTokens = memory.DefaultMaxOutputTokens
	}
	w := memory.WindowConfig{MinTokens: c.KeepMinTokens, MinTextMessages: c.KeepMinTextMessages, MaxTokens: c.KeepMaxTokens}.WithDefaults()
	c.KeepMinTokens, c.KeepMinTextMessages, c.KeepMaxTokens = w.MinTokens, w.MinTextMessages, w.MaxTokens
	if c.SectionMaxChars <= 0 {
		c.SectionMaxChars = memory.DefaultSectionMaxChars
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.TenantConcurrency <= 0 {
		c.TenantConcurrency = 64
	}
	if c.TenantConcurrency >= c.Concurrency {
		c.TenantConcurrency = 0 // no bound below the replica's own
	}
	if c.TailCacheBytes == 0 {
		c.TailCacheBytes = 64 << 20
	}
	if c.MaxReadRecords <= 0 {
		c.MaxReadRecords = 50000
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = 3
	}
	if c.FullCompactTimeout <= 0 {
		c.FullCompactTimeout = 120 * time.Second
	}
	if c.FullCompactMaxChars <= 0 {
		c.FullCompactMaxChars = 600000
	}
	return c
}
