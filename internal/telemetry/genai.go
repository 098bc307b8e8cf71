package telemetry

import "go.opentelemetry.io/otel/attribute"

// The OpenTelemetry GenAI semantic conventions' names for memory work
// (status: development; opt-in for their newest form in other libraries
// through OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental). Recall's
// spans keep their own names and recall.* attributes and carry these beside
// them, so a backend that groups GenAI memory operations finds Recall's.
const (
	GenAIOperation             = attribute.Key("gen_ai.operation.name")
	GenAIConversationID        = attribute.Key("gen_ai.conversation.id")
	GenAIConversationCompacted = attribute.Key("gen_ai.conversation.compacted")
	GenAIMemoryStoreID         = attribute.Key("gen_ai.memory.store.id")
	GenAIMemoryRecordCount     = attribute.Key("gen_ai.memory.record.count")
)

// Memory operations of the conventions that Recall performs.
const (
	OpSearchMemory = "search_memory" // reading memory to serve it (compaction)
	OpUpdateMemory = "update_memory" // committing a session's notes
	OpDeleteMemory = "delete_memory" // erasing a session's or user's data
)

// MemoryOp returns the GenAI attributes of one memory operation op on the
// memory store (a bucket name) of the conversation (a session id; empty
// leaves it out).
func MemoryOp(op, store, conversation string) []attribute.KeyValue {
	kv := []attribute.KeyValue{GenAIOperation.String(op), GenAIMemoryStoreID.String(store)}
	if conversation != "" {
		kv = append(kv, GenAIConversationID.String(conversation))
	}
	return kv
}
