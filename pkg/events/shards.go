package events

import (
	"strconv"
	"strings"
)

// The transcript is split into S shards, one stream per shard, so that its
// load spreads over as many raft leaders (and nodes) as there are shards and
// every reader that scales out reads only the shards it owns. A session lives
// in exactly one shard, computed from its ids alone:
//
//	shard   = SessionPartition(tenant, session, S)   (FNV-1a 32 of tenant+session, mod S)
//	stream  = RECALL_TRANSCRIPT_<shard>
//	subject = recall.transcript.<shard>.<tenant>.<session>
//
// S is fixed when the streams are created (RECALL_SHARDS) and recorded in
// every shard stream's metadata (ShardsMetadataKey); a client that does not
// know it reads it from the first shard (see Layout). Changing it would move
// sessions between shards: it is refused (`recall migrate` moves a
// single-stream deployment to shards; changing S of a sharded one is not
// supported yet).
const (
	// StreamTranscriptShardPrefix + shard names a shard's stream.
	StreamTranscriptShardPrefix = "RECALL_TRANSCRIPT_"
	// ShardsMetadataKey records S on every shard stream.
	ShardsMetadataKey = "recall.shards"
	// ShardMetadataKey records a shard stream's own number.
	ShardMetadataKey = "recall.shard"
	// DefaultShards is S when nothing else is configured.
	DefaultShards = 4
	// MaxShards bounds S: every shard is a stream (a raft group on a
	// cluster) and every sharded reader holds one consumer per shard it owns.
	MaxShards = 1024
)

// Layout is where the transcript of a session is stored: its shard count S.
// The zero Layout is invalid; use NewLayout.
type Layout struct{ shards int }

// NewLayout returns the layout of s shards (clamped to 1..MaxShards).
func NewLayout(s int) Layout { return Layout{shards: min(max(s, 1), MaxShards)} }

// Shards is S.
func (l Layout) Shards() int { return max(l.shards, 1) }

// Shard is the shard of a session (tenant and session must be valid ids).
func (l Layout) Shard(tenant, session string) int {
	return SessionPartition(tenant, session, l.Shards())
}

// Stream is the stream a session's records are stored in.
func (l Layout) Stream(tenant, session string) string {
	return TranscriptShardStream(l.Shard(tenant, session))
}

// Subject is the subject a session's records are published and stored on.
func (l Layout) Subject(tenant, session string) string {
	return ShardSubject(l.Shard(tenant, session), tenant, session)
}

// Streams lists the shard streams in shard order.
func (l Layout) Streams() []string {
	out := make([]string, l.Shards())
	for k := range out {
		out[k] = TranscriptShardStream(k)
	}
	return out
}

// TranscriptShardStream names shard k's stream.
func TranscriptShardStream(k int) string { return StreamTranscriptShardPrefix + strconv.Itoa(k) }

// ShardSubject is the subject of a session stored in shard k.
func ShardSubject(k int, tenant, session string) string {
	return SubjectTranscriptRoot + "." + strconv.Itoa(k) + "." + tenant + "." + session
}

// ShardSubjects is shard k's subject filter, recall.transcript.<k>.*.*.
func ShardSubjects(k int) string { return SubjectTranscriptRoot + "." + strconv.Itoa(k) + ".*.*" }

// TenantTranscripts matches every transcript subject of tenant in any
// shard (for permissions and subject filters).
func TenantTranscripts(tenant string) string { return SubjectTranscriptRoot + ".*." + tenant + ".*" }

// AllTranscripts matches every sharded transcript subject.
const AllTranscripts = SubjectTranscriptRoot + ".*.*.*"

// ParseTranscriptSubject splits recall.transcript.<shard>.<tenant>.<session>.
func ParseTranscriptSubject(subject string) (shard int, tenant, session string, ok bool) {
	rest, found := strings.CutPrefix(subject, SubjectTranscriptRoot+".")
	if !found {
		return 0, "", "", false
	}
	num, key, found := strings.Cut(rest, ".")
	if !found {
		return 0, "", "", false
	}
	k, err := strconv.Atoi(num)
	if err != nil || k < 0 || k >= MaxShards {
		return 0, "", "", false
	}
	tenant, session, found = strings.Cut(key, ".")
	if !found || ValidateID(tenant) != nil || ValidateID(session) != nil {
		return 0, "", "", false
	}
	return k, tenant, session, true
}

// LegacyTranscriptSubject is the subject of a session in the single
// RECALL_TRANSCRIPT stream of deployments before shards
// (recall.transcript.<tenant>.<session>); only `recall migrate` reads it.
func LegacyTranscriptSubject(tenant, session string) string {
	return SubjectTranscriptRoot + "." + tenant + "." + session
}
