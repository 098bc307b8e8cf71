// Package events is Recall's wire contract: the CloudEvents types Recall accepts
// and publishes, their data payloads, and the names of every stream, subject,
// KV bucket and durable consumer.
//
// The names are a contract between replicas and versions: renaming a durable
// replays a stream, renaming a subject strands stored data. Change them only
// with a migration.
//
// The package depends on the CloudEvents event model (and json-iterator for
// the hot decoding path) only; NATS glue lives in the sibling package natsce
// and in the services.
package events

import (
	"strconv"
	"strings"
)

// Streams.
const (
	// The transcript — every accepted session event, messages and
	// lifecycle — is stored in shard streams: see Layout (shards.go).
	// StreamExtract is the work queue of extraction requests, partitioned by
	// session with a subject transform.
	StreamExtract = "RECALL_EXTRACT"
	// StreamEvents carries lifecycle notifications for platforms:
	// extraction requested/completed/failed and compaction served.
	StreamEvents = "RECALL_EVENTS"
)

// KV buckets.
const (
	// BucketMemory holds one MemoryRecord per session under MemoryKey.
	BucketMemory = "RECALL_MEMORY"
	// BucketStatus holds one StatusRecord per running extraction, with a
	// per-key TTL equal to the stale threshold.
	BucketStatus = "RECALL_STATUS"
	// BucketConfig holds TenantConfig documents under ConfigKey(tenant).
	BucketConfig = "RECALL_CONFIG"
	// BucketWorkers holds extractor membership heartbeats (per-key TTL).
	BucketWorkers = "RECALL_WORKERS"
	// BucketParked holds extraction requests that failed permanently, until
	// they are replayed.
	BucketParked = "RECALL_PARKED"
	// BucketTriggers holds the trigger replicas' membership heartbeats
	// (per-key TTL): they share the transcript's shards.
	BucketTriggers = "RECALL_TRIGGERS"
	// BucketTriggerState holds snapshots of long sessions' trigger state
	// under MemoryKey, so that a rebuild replays only the records after one.
	BucketTriggerState = "RECALL_TRIGGER_STATE"
	// BucketGateway is provisioned for what the model gateway stored of
	// each session's traffic (fingerprints of blocks, never their text);
	// the gateway does not use it yet: it reads the ids of a session's
	// stored records from the transcript once (gatewaysvc's sessionState).
	BucketGateway = "RECALL_GATEWAY"
)

// Durable consumers.
const (
	// DurableTrigger is the trigger's consumer on every transcript shard.
	DurableTrigger = "recall-trigger"
	// DurableExtractPrefix + partition number names the consumer of one
	// extraction partition, e.g. "recall-extract-7".
	DurableExtractPrefix = "recall-extract-"
	// PriorityGroupExtract is the pinned priority group every partition
	// consumer declares.
	PriorityGroupExtract = "recall"
)

// Subject roots.
const (
	SubjectTranscriptRoot = "recall.transcript"
	SubjectExtractRoot    = "recall.extract"
	// SubjectExtractPartitioned is where StreamExtract stores requests after
	// its subject transform: recall.extractp.<partition>.<tenant>.<session>.
	SubjectExtractPartitioned = "recall.extractp"
	// SubjectExtractShare is where extractor workers offer each other the
	// requests that wait for a slot (core NATS, never stored: StreamExtract
	// takes recall.extract.<tenant>.<session>, four tokens; the reservations
	// have three, SubjectExtractShare.run.<worker> and .result.<worker>
	// five).
	SubjectExtractShare = SubjectExtractRoot + ".share"
	SubjectEventsRoot   = "recall.events"
	SubjectAPIRoot      = "recall.api"
)

// API verbs served by nats micro services on APISubject(verb, tenant, session).
const (
	VerbIngest  = "ingest"
	VerbCompact = "compact"
	VerbExtract = "extract"
	VerbMemory  = "memory"
	// VerbEdit asks which old tool results and thinking to clear from a
	// session's context (EditRequest → EditReply).
	VerbEdit = "edit"
)

// Kinds of lifecycle notifications on StreamEvents, the second token of
// EventsSubject.
const (
	KindExtractionRequested = "extraction_requested"
	KindExtractionCompleted = "extraction_completed"
	KindExtractionFailed    = "extraction_failed"
	KindCompactionServed    = "compaction_served"
)

// ExtractSubject is the subject extraction requests are published to; the
// stream maps it to a partition.
func ExtractSubject(tenant, session string) string {
	return SubjectExtractRoot + "." + tenant + "." + session
}

// ExtractPartitionFilter is the filter subject of partition p's consumer.
func ExtractPartitionFilter(p int) string {
	return SubjectExtractPartitioned + "." + itoa(p) + ".>"
}

// ExtractDurable names the durable consumer of partition p.
func ExtractDurable(p int) string { return DurableExtractPrefix + itoa(p) }

// SessionPartition is the partition of a session among n: FNV-1a 32 of
// tenant and session concatenated, modulo n — the server's
// {{partition(n,1,2)}} on a <root>.<tenant>.<session> subject, so a session
// has the same partition number in RECALL_EXTRACT and in the trigger when
// the counts are equal.
func SessionPartition(tenant, session string, n int) int {
	h := uint32(2166136261)
	for _, s := range [2]string{tenant, session} {
		for i := 0; i < len(s); i++ {
			h ^= uint32(s[i])
			h *= 16777619
		}
	}
	return int(h % uint32(n))
}

// EventsSubject is the subject a lifecycle notification is published on.
func EventsSubject(kind, tenant, session string) string {
	return SubjectEventsRoot + "." + kind + "." + tenant + "." + session
}

// APISubject is the request-reply subject of verb for one session.
func APISubject(verb, tenant, session string) string {
	return SubjectAPIRoot + "." + verb + "." + tenant + "." + session
}

// MemoryKey is the RECALL_MEMORY and RECALL_STATUS key of a session.
func MemoryKey(tenant, session string) string { return tenant + "." + session }

// ConfigKey is the RECALL_CONFIG key of a tenant's configuration.
func ConfigKey(tenant string) string { return "tenant." + tenant }

// DedupID is the Nats-Msg-Id of an event: the event id scoped by tenant, so
// two tenants may use the same ids without colliding.
func DedupID(tenant, eventID string) string { return tenant + ":" + eventID }

// InboxRoot is the first token of every tenant's reply space.
const InboxRoot = "_INBOX_TENANT"

// InboxPrefix is the reply space of tenant: "_INBOX_TENANT.<tenant>". A
// tenant's clients connect with it as their inbox prefix and receive replies
// only under InboxPrefix(tenant)+"."; Recall's services reply to a request on
// APISubject(verb, tenant, session) only there. Tenant ids cannot contain
// '.', so no tenant's prefix covers another's, and none covers the services'
// shared "_INBOX.".
func InboxPrefix(tenant string) string { return InboxRoot + "." + tenant }

// SplitSessionSubject returns the tenant and session of a subject whose last
// two tokens are tenant and session (transcript, extract, events, api).
func SplitSessionSubject(subject string) (tenant, session string, ok bool) {
	i := strings.LastIndexByte(subject, '.')
	if i <= 0 {
		return "", "", false
	}
	j := strings.LastIndexByte(subject[:i], '.')
	if j < 0 {
		return "", "", false
	}
	tenant, session = subject[j+1:i], subject[i+1:]
	if ValidateID(tenant) != nil || ValidateID(session) != nil {
		return "", "", false
	}
	return tenant, session, true
}

func itoa(n int) string { return strconv.Itoa(n) }
