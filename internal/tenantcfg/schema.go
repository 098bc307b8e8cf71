package tenantcfg

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// SchemaID is where the published schema lives.
const SchemaID = "https://github.com/recallhq/recall/blob/main/docs/tenant-config.schema.json"

// fieldDocs describes every member of the configuration's types, keyed by
// "<Go type>.<json name>". The schema takes its descriptions from here; a
// member without one fails TestSchemaGolden, so a new field is documented
// when it is added.
var fieldDocs = map[string]string{
	"TenantConfig.session_memory":                 "Gate: threshold extractions of the tenant's sessions on or off (default: on, unless the trigger runs with RECALL_SESSION_MEMORY_OFF). Manual extraction works either way.",
	"TenantConfig.sm_compact":                     "Gate: compaction from session memory on or off (default on). Off, compact requests answer that compaction is disabled.",
	"TenantConfig.minimum_message_tokens_to_init": "Context size in tokens at which a session's memory is first extracted (0: the trigger's RECALL_MIN_TOKENS_TO_INIT, 10,000).",
	"TenantConfig.minimum_tokens_between_update":  "Context growth in tokens required between two extractions (0: RECALL_MIN_TOKENS_BETWEEN_UPDATE, 5,000).",
	"TenantConfig.tool_calls_between_updates":     "Tool calls since the last extraction that allow one inside a tool loop (0: RECALL_TOOL_CALLS_BETWEEN_UPDATES, 3).",
	"TenantConfig.session_index":                  "Gate: the session index (names, summaries, tags, questions) on or off (default on).",
	"TenantConfig.min_new_user_messages":          "User requests after the last indexing that make a turn end index the session again (0: 5).",
	"TenantConfig.query_max_budget_tokens":        "Most session tokens one question or resolve request sends to the model (0: the indexer's RECALL_QUERY_MAX_BUDGET_TOKENS, 50,000). At most the operator's ceiling RECALL_TENANT_MAX_QUERY_BUDGET_TOKENS (default 200,000); a larger value is refused.",
	"TenantConfig.memory_policy":                  "Default long-term memory policy of sessions that carry none (unset: self memory on, peer memory off, every type).",
	"TenantConfig.custom_memory_types":            "The tenant's own long-term memory types, added to the built-in ones; at most the operator's ceiling RECALL_TENANT_MAX_CUSTOM_MEMORY_TYPES (default 32).",
	"TenantConfig.template":                       "Replaces the default session-memory template (markdown).",
	"TenantConfig.prompt":                         "Replaces the default extraction prompt; {{currentNotes}} and {{notesPath}} are substituted.",
	"TenantConfig.context_management":             "Default context editing, for compactions that carry none and for edit requests (unset: compactions edit nothing; edit requests use clear_tool_uses with the API's defaults).",
	"TenantConfig.retention":                      "How long the tenant's sessions and notifications are kept (unset: the stream-wide limits, which cap every tenant).",
	"TenantConfig.gateway":                        "The model gateway's compaction for the tenant (unset: transparent compaction off, client compaction on with the default rules).",
	"GatewayConfig.compact_above_tokens":          "Transparent compaction: a request whose context holds more input tokens than this is forwarded as Recall's summary plus the kept window, the client keeping its history (0 or unset: off; otherwise at least 20,000).",
	"GatewayConfig.client_compaction":             "How a client's own summarization turn (Claude Code's, Codex's) is recognized and answered from memory instead of by the model.",
	"ClientCompaction.enabled":                    "Gate: answer clients' summarization turns from memory (default on).",
	"ClientCompaction.rules":                      "Rules recognizing a summarization turn, first match wins (unset: Claude Code's and Codex's). At most 16.",
	"ClientCompactionRule.name":                   "The client the rule recognizes, for logs and metrics.",
	"ClientCompactionRule.contains":               "Phrases the last user message's text must all hold (case-insensitive, each at least 8 characters).",
	"ClientCompactionRule.answer":                 "The answer's format: summary_tags (<summary>…</summary>, Claude Code) or plain (default).",
	"MemoryPolicy.self":                           "Memory about the user, written from the session.",
	"MemoryPolicy.peer":                           "Memory about the session's peers.",
	"MemoryPolicy.memory_types":                   "Limits self and peer writes to these types (built-in or custom); unset allows every enabled type.",
	"PolicyTarget.enabled":                        "Whether this target is written.",
	"CustomMemoryType.name":                       "The type's id (A-Z a-z 0-9 - _), not a built-in type's and unique.",
	"CustomMemoryType.description":                "What the type holds, for people.",
	"CustomMemoryType.prompt":                     "Tells the model what to extract (required).",
	"CustomMemoryType.schema":                     "Describes the document's shape.",
	"CustomMemoryType.agent_only":                 "Written to self memory only.",
	"ContextManagement.edits":                     "Strategies, applied in order; clear_thinking comes before clear_tool_uses.",
	"ContextEdit.type":                            "The strategy.",
	"ContextEdit.trigger":                         "clear_tool_uses: clear only once the context holds at least this many input_tokens or tool_uses (default 100,000 input tokens).",
	"ContextEdit.keep":                            "The most recent tool uses (clear_tool_uses, tool_uses, default 3) or thinking turns (clear_thinking, thinking_turns or \"all\", default 1) left untouched.",
	"ContextEdit.clear_at_least":                  "clear_tool_uses: clear nothing unless at least this many input tokens can be freed.",
	"ContextEdit.exclude_tools":                   "clear_tool_uses: tool uses of these tools are never cleared.",
	"ContextEdit.clear_tool_inputs":               "clear_tool_uses: clear the inputs of cleared tool uses too.",
	"EditAmount.type":                             "The unit.",
	"EditAmount.value":                            "The amount (≥ 0).",
	"Retention.session_max_age":                   "Most a session's transcript, memory and index entry may age, as a Go duration of at least 1m (\"720h\"); older sessions are erased whole.",
	"Retention.notifications_max_age":             "Most the tenant's notifications may age, as a Go duration of at least 1m.",
}

// fieldExtra adds constraints to a member's schema beyond its Go type.
var fieldExtra = map[string]map[string]any{
	"ClientCompactionRule.answer":     {"enum": []string{events.AnswerSummaryTags, events.AnswerPlain}},
	"ContextEdit.type":                {"enum": []string{events.EditClearToolUses, events.EditClearThinking}},
	"EditAmount.type":                 {"enum": []string{events.UnitInputTokens, events.UnitToolUses, events.UnitThinkingTurns}},
	"CustomMemoryType.name":           {"pattern": "^[A-Za-z0-9_-]+$"},
	"Retention.session_max_age":       {"pattern": durationPattern},
	"Retention.notifications_max_age": {"pattern": durationPattern},
}

// durationPattern matches Go durations (the minimum of 1m is checked by
// Validate, not the schema).
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// Schema returns the JSON Schema (draft 2020-12) of a tenant
// configuration, generated from events.TenantConfig by reflection with
// the descriptions of fieldDocs; docs/tenant-config.schema.json is its
// output. Validate checks more than the schema can say (known memory
// types, the order of edits, durations of at least a minute).
func Schema() []byte {
	s := schemaOf(reflect.TypeFor[events.TenantConfig]())
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "Recall tenant configuration"
	s["description"] = "A tenant's live configuration (RECALL_CONFIG; GET/PUT/PATCH /v1/config). Unset fields take the service defaults. At most RECALL_TENANT_MAX_CONFIG_BYTES (default 262,144 bytes of JSON). See docs/tenant-config.md."
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// undocumented lists the members of the configuration's types that
// fieldDocs does not describe.
func undocumented() []string {
	var out []string
	walkStructs(reflect.TypeFor[events.TenantConfig](), map[reflect.Type]bool{}, func(t reflect.Type, name string) {
		if _, ok := fieldDocs[t.Name()+"."+name]; !ok {
			out = append(out, t.Name()+"."+name)
		}
	})
	return out
}

func walkStructs(t reflect.Type, seen map[reflect.Type]bool, f func(reflect.Type, string)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || reflect.PointerTo(t).Implements(unmarshaler) {
		return
	}
	seen[t] = true
	for name, sf := range jsonFields(t) {
		f(t, name)
		walkStructs(sf.Type, seen, f)
	}
}

func schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[events.EditKeep]() {
		return map[string]any{"oneOf": []any{
			map[string]any{"const": "all"},
			schemaOf(reflect.TypeFor[events.EditAmount]()),
		}}
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for name, sf := range jsonFields(t) {
			p := schemaOf(sf.Type)
			key := t.Name() + "." + name
			if d := fieldDocs[key]; d != "" {
				p["description"] = d
			}
			for k, v := range fieldExtra[key] {
				p[k] = v
			}
			props[name] = p
			if k := sf.Type.Kind(); !strings.Contains(sf.Tag.Get("json"), "omitempty") && (k == reflect.String || k == reflect.Int64 || k == reflect.Int) {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			slices.Sort(required)
			s["required"] = required
		}
		return s
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer", "minimum": 0}
	}
	return map[string]any{}
}
