// The replies of Recall's HTTP edge as JSDoc types (docs/api.md); the client
// returns the decoded JSON, so a field this file does not list is still there.
export {};

/**
 * @typedef {{index: number, id: string, status: number, seq?: number, duplicate?: boolean, field?: string, error?: string}} EventResult
 * @typedef {{status: number, partial: boolean, accepted?: number, duplicates?: number, rejected?: number,
 *   results?: EventResult[], errors: EventResult[]}} PublishResult
 *   `status` 202 (everything stored, duplicates included) or 207 (`partial`: `errors` lists the rejected events)
 * @typedef {{uuid: string, parent_uuid?: string, role: "user" | "assistant", content: string | Array<{type: string, [k: string]: any}>,
 *   message_id?: string, model?: string, stop_reason?: string, usage?: Record<string, number>, query_source?: string}} Message
 * @typedef {{specversion: string, id: string, type: string, subject: string, source: string, recallseq?: string,
 *   recallsynthetic?: string, data: Message, [ext: string]: any}} StoredEvent a stored record, structured mode
 * @typedef {{outcome: string, served: boolean, reason?: string,
 *   boundary?: {type: string, subtype: string, trigger: string, pre_tokens: number,
 *     preserved_segment?: {head_uuid?: string, anchor_uuid?: string, tail_uuid?: string}},
 *   summary?: Message & {is_compact_summary?: boolean}, kept?: StoredEvent[], kept_count?: number,
 *   first_kept_seq?: number, last_seq?: number, last_summarized_id?: string, last_summarized_seq?: number,
 *   memory_revision?: number, tokens_before?: number, tokens_after?: number, threshold?: number,
 *   truncated?: boolean, waited_ms?: number, duration_us?: number, repaired?: Array<{rule: string, uuid: string}>}} CompactReply
 *   served: the new context is `summary`, then `kept` in order (docs/compaction.md, "Reply")
 * @typedef {{applied_edits: any[], clear: Array<{uuid: string, seq: number, block: number, kind: string, action: string,
 *   placeholder?: string, tokens: number}>, tokens_before: number, tokens_after: number}} EditReply
 * @typedef {{success: boolean, memory_key?: string, up_to_seq?: number, revision?: number, error?: string}} ExtractResult
 * @typedef {{notes: string, last_summarized_id?: string, last_summarized_seq?: number, covered_seq: number,
 *   usage?: Record<string, number>, extractions: number, updated_at?: string, provider?: string, model?: string}} MemoryRecord
 * @typedef {{key: string, revision: number, record: MemoryRecord}} MemoryReply
 * @typedef {{session: string, name?: string, description?: string, summary?: string, tags?: string[], [k: string]: any}} SessionIndex
 * @typedef {{sessions: SessionIndex[], next?: string}} SessionsPage
 * @typedef {{index: SessionIndex, revision: number, outcome?: {success: boolean, [k: string]: any}}} IndexReply
 * @typedef {{resolved: Array<Record<string, any>>, context?: Message}} ResolveReply
 * @typedef {{answer: string, sources: Array<{seq: number, id: string, role: string, excerpt: string}>, [k: string]: any}} QueryReply
 * @typedef {{written: any[], skipped: any[], denied: any[], [k: string]: any}} CommitReply
 * @typedef {{documents: Array<{target: string, type: string, content: string, revision: number}>, context: string}} UserMemory
 * @typedef {{tenant: string, revision: number, config: Record<string, any>, meta?: {actor?: string, at?: string, via?: string}}} ConfigReply
 * @typedef {{tenant: string, session?: string, user?: string, parts: Array<{store: string, what: string, count: number}>,
 *   total: number, tombstone_until?: string, erased_at?: string, sessions?: EraseReceipt[]}} EraseReceipt
 */
