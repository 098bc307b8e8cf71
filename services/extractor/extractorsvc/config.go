package extractorsvc

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// LLMConfig is llm.Config under a name that can be embedded beside
// provision.Config (the variables stay RECALL_LLM_*).
type LLMConfig = llm.Config

// Config configures the extractor service (environment variables RECALL_*).
// Zero values take the defaults of their tags (internal/envconf), so tests
// may build a literal.
type Config struct {
	NATS natsconn.Config
	provision.Config
	LLMConfig

	OpsAddr string `envconfig:"EXTRACTOR_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`
	// WorkerID names this worker in the consumer group; it must be unique
	// among live workers.
	WorkerID string `envconfig:"EXTRACTOR_WORKER_ID" desc:"worker id in the consumer group (default: hostname + random suffix)"`

	AckWait        time.Duration `envconfig:"EXTRACTOR_ACK_WAIT" default:"30s" desc:"ack wait of the partition consumers; renewed with in-progress acks while working"`
	PinnedTTL      time.Duration `envconfig:"EXTRACTOR_PINNED_TTL" desc:"priority-group pin TTL (default: the ack wait)"`
	HeartbeatTTL   time.Duration `envconfig:"EXTRACTOR_HEARTBEAT_TTL" default:"10s" desc:"membership heartbeat TTL: a crashed worker's partitions move after this long"`
	FetchWait      time.Duration `envconfig:"EXTRACTOR_FETCH_WAIT" default:"5s" desc:"longest pull request (bounds how long a lost partition keeps fetching)"`
	StaleThreshold time.Duration `envconfig:"STALE_THRESHOLD" default:"60s" desc:"age after which a running extraction counts as gone: TTL of its status record (renewed while alive); shared with the compactor"`
	Concurrency    int           `envconfig:"EXTRACTOR_CONCURRENCY" default:"8" desc:"extractions one worker runs at once (across its partitions)"`
	DrainTimeout   time.Duration `envconfig:"EXTRACTOR_DRAIN_TIMEOUT" default:"30s" desc:"on shutdown or hand-off, how long an in-flight extraction may finish"`
	// ShareOff stops this worker from offering the requests that wait for
	// one of its slots to idle workers, and from running theirs.
	ShareOff bool `envconfig:"EXTRACTOR_SHARE_OFF" desc:"do not share waiting requests with other workers (each runs only its own partitions')"`

	MaxTurns              int   `envconfig:"EXTRACTOR_MAX_TURNS" default:"4" desc:"model calls per extraction that may apply edits"`
	MaxConversationTokens int64 `envconfig:"EXTRACTOR_MAX_CONVERSATION_TOKENS" default:"150000" negative:"ok" desc:"cap of the transcript sent to the model (estimated tokens; oldest messages before the last summarized point dropped first; negative: no cap)"`
	MaxBlockTokens        int   `envconfig:"EXTRACTOR_MAX_BLOCK_TOKENS" default:"20000" negative:"ok" desc:"a longer text, tool result or tool input string (estimated tokens) is shown to the model by its beginning and end (negative: never clipped)"`
	MaxAttempts           int   `envconfig:"EXTRACTOR_MAX_ATTEMPTS" default:"5" desc:"deliveries of a request failing on infrastructure errors (NATS) before it is parked"`

	// Provider, when set, is used instead of building one from llm.Config
	// (tests and benchmarks).
	Provider llm.Provider `ignored:"true" json:"-"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

var badIDChars = regexp.MustCompile(`[^-_a-zA-Z0-9]+`)

// withDefaults fills unset values from their tags (internal/envconf) and
// derives the rest: the worker id, a stale threshold of at least a second.
func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.WorkerID = host + "-" + hex.EncodeToString(b[:])
	}
	c.WorkerID = badIDChars.ReplaceAllString(c.WorkerID, "_")
	c.StaleThreshold = max(c.StaleThreshold, time.Second)
	return c
}
