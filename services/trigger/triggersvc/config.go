package triggersvc

import (
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/memory"
)

// Config configures the trigger service (environment variables RECALL_*).
// Tests and embedders build it directly; zero values take the defaults
// listed in the tags (see WithDefaults).
type Config struct {
	NATS natsconn.Config
	provision.Config

	MinTokensToInit         int64         `envconfig:"MIN_TOKENS_TO_INIT" default:"10000" desc:"context size (tokens) at which a session's memory is first extracted (reference minimumMessageTokensToInit)"`
	MinTokensBetweenUpdate  int64         `envconfig:"MIN_TOKENS_BETWEEN_UPDATE" default:"5000" desc:"context growth (tokens) required between extractions (reference minimumTokensBetweenUpdate)"`
	ToolCallsBetweenUpdates int           `envconfig:"TOOL_CALLS_BETWEEN_UPDATES" default:"3" desc:"tool calls since the last extraction that allow one inside a tool loop (reference toolCallsBetweenUpdates)"`
	ResponseQuietPeriod     time.Duration `envconfig:"RESPONSE_QUIET_PERIOD" default:"5s" desc:"a response without stop_reason is complete when no record of it follows within this period"`
	ReferenceCompat         bool          `envconfig:"TRIGGER_REFERENCE_COMPAT" default:"false" desc:"reproduce the reference's defects (no baseline reset after compaction; natural break from the last record only)"`
	SessionMemoryOff        bool          `envconfig:"SESSION_MEMORY_OFF" default:"false" desc:"turn threshold extractions off for tenants whose config does not set session_memory (manual extraction still works)"`

	MaxSessions      int           `envconfig:"TRIGGER_MAX_SESSIONS" default:"200000" desc:"sessions kept in memory; least recently used ones are evicted and rebuilt from the transcript on their next record"`
	SessionIdle      time.Duration `envconfig:"TRIGGER_SESSION_IDLE" default:"10m" desc:"sessions without records for this long are evicted from memory"`
	WarmStartRecords int           `envconfig:"TRIGGER_WARM_START_RECORDS" default:"5000000" negative:"ok" desc:"at start, rebuild every session from one read of the transcript when it holds at most this many records before the trigger's position (negative = never: sessions are then rebuilt one by one on their next record)"`
	MaxAckPending    int           `envconfig:"TRIGGER_MAX_ACK_PENDING" default:"200000" desc:"consumer MaxAckPending; must exceed the records stored per quiet period"`
	AckWait          time.Duration `envconfig:"TRIGGER_ACK_WAIT" default:"30s" desc:"consumer AckWait"`
	PullBatch        int           `envconfig:"TRIGGER_PULL_BATCH" default:"2000" desc:"messages buffered per pull"`
	AckEvery         int           `envconfig:"TRIGGER_ACK_EVERY" default:"1000" desc:"records processed between acknowledgements (AckAll)"`
	SnapshotEvery    int           `envconfig:"TRIGGER_SNAPSHOT_EVERY" default:"2000" negative:"ok" desc:"records of one session between snapshots of its state in RECALL_TRIGGER_STATE (a rebuild replays only what follows the newest; negative: none)"`
	PinnedTTL        time.Duration `envconfig:"TRIGGER_PINNED_TTL" default:"10s" desc:"a lost replica's consumers (its shards) move to another replica after it stopped pulling for this long"`

	// MemberID names the replica in the trigger's group: the replicas
	// share the transcript's shards (RECALL_SHARDS).
	MemberID string `envconfig:"TRIGGER_MEMBER_ID" desc:"this replica's id in the trigger's shard group (default: hostname + random suffix)"`

	ExtractTimeout time.Duration `envconfig:"MANUAL_EXTRACT_TIMEOUT" default:"60s" desc:"how long a manual extraction waits for its result by default"`
	OpsAddr        string        `envconfig:"TRIGGER_OPS_ADDR" desc:"address of /healthz /readyz /metrics (empty = off)"`
}

// WithDefaults returns c with unset values replaced by the defaults of
// their tags (internal/envconf) and a member id.
func (c Config) WithDefaults() Config {
	envconf.Defaults(&c)
	c.MemberID = pcgroup.MemberID(c.MemberID)
	return c
}

// Thresholds are the global defaults as a memory.Thresholds.
func (c Config) Thresholds() memory.Thresholds {
	return memory.Thresholds{
		MinimumMessageTokensToInit: c.MinTokensToInit,
		MinimumTokensBetweenUpdate: c.MinTokensBetweenUpdate,
		ToolCallsBetweenUpdates:    c.ToolCallsBetweenUpdates,
		QuietPeriod:                c.ResponseQuietPeriod,
		ReferenceCompat:            c.ReferenceCompat,
	}
}
