package longtermsvc

import (
	"log/slog"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/provision"
)

// LLMConfig is llm.Config under a name that can be embedded beside
// provision.Config (the variables stay RECALL_LLM_*).
type LLMConfig = llm.Config

// Config configures the long-term memory service (environment variables
// RECALL_*). Zero values take the defaults below.
type Config struct {
	NATS natsconn.Config
	provision.Config
	LLMConfig

	OpsAddr string `envconfig:"LONGTERM_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`

	Model       string        `envconfig:"LONGTERM_MODEL" desc:"model for long-term memory extraction; empty uses RECALL_LLM_MODEL"`
	Concurrency int           `envconfig:"LONGTERM_CONCURRENCY" default:"4" desc:"commits run at once (one at a time per user)"`
	Timeout     time.Duration `envconfig:"LONGTERM_TIMEOUT" default:"180s" desc:"time limit of one commit (all its model calls)"`
	MaxTurns    int           `envconfig:"LONGTERM_MAX_TURNS" default:"6" desc:"most model calls per extraction phase (tool results go back to the model)"`
	MaxBatch    int           `envconfig:"LONGTERM_MAX_BATCH_CHARS" default:"200000" desc:"most batch characters shown to the model (the newest kept)"`
	CommitWait  time.Duration `envconfig:"LONGTERM_COMMIT_WAIT" default:"60s" desc:"how long an explicit commit waits for a running commit of the same user"`
	// A queued commit that fails is tried again after RetryBackoff,
	// doubling per try (at most 32 times it), and parked on its
	// MaxAttempts-th try.
	MaxAttempts  int           `envconfig:"LONGTERM_MAX_ATTEMPTS" default:"5" desc:"tries of a failing queued commit (model or storage errors) before it is parked"`
	RetryBackoff time.Duration `envconfig:"LONGTERM_RETRY_BACKOFF" default:"10s" desc:"wait before the second try of a failed commit; doubles per try, at most 32 times it"`
	// ID names the replica in the commit group; replicas share the
	// RECALL_COMMITS partitions (RECALL_PARTITIONS of them) by user.
	ID           string        `envconfig:"LONGTERM_ID" desc:"member id in the commit group and the transcript's shard group (letters, digits, - _); empty: hostname + random suffix"`
	HeartbeatTTL time.Duration `envconfig:"LONGTERM_HEARTBEAT_TTL" default:"10s" desc:"a replica that stops heartbeating for this long loses its commit partitions"`

	// Provider, when set, is used instead of building one (tests).
	Provider llm.Provider `ignored:"true" json:"-"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags (internal/envconf) and
// names the replica.
func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	c.ID = pcgroup.MemberID(c.ID)
	return c
}
