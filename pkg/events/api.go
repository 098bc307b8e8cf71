package events

// Request and reply bodies of the request-reply API (APISubject). Over HTTP
// the same JSON travels on /v1/sessions/{session}/<verb>. Errors are micro
// service errors: the Nats-Service-Error-Code header holds an HTTP-like
// status ("400", "404", "409", "503", "504") and Nats-Service-Error the text.

// ExtractRequest asks for a manual extraction of one session, bypassing the
// thresholds and gates (VerbExtract).
type ExtractRequest struct {
	// TimeoutMS bounds the wait for the result; 0 uses the server default.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// ExtractResult answers an ExtractRequest, in the reference's shape plus the
// position reached.
type ExtractResult struct {
	Success bool `json:"success"`
	// MemoryKey is the RECALL_MEMORY key the notes were written to.
	MemoryKey string `json:"memory_key,omitempty"`
	Error     string `json:"error,omitempty"`
	UpToSeq   uint64 `json:"up_to_seq,omitempty"`
	Revision  uint64 `json:"revision,omitempty"`
}

// MemoryReply answers VerbMemory: the session's memory record and its KV
// revision.
type MemoryReply struct {
	Key      string       `json:"key"`
	Revision uint64       `json:"revision"`
	Record   MemoryRecord `json:"record"`
}

// ProblemTypeBase prefixes every RFC 9457 problem "type" Recall answers
// with; the fragment names the section of docs/api.md that explains it.
const ProblemTypeBase = "https://github.com/recallhq/recall/blob/main/docs/api.md#"
