package sessiongen

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// writer frames a conversation as Claude Code 2.0 JSONL records, as the
// importer's fixture generator (internal/importer/testdata/gen) does: one
// record per line linked by uuid/parentUuid, a streamed response split into
// one record per content block sharing message.id, usage on every assistant
// record, compact_boundary records and compact summaries.
type writer struct {
	buf       bytes.Buffer
	session   string
	cwd       string
	branch    string
	version   string
	model     string
	now       time.Time
	parent    string
	n         int
	ctxTokens int64 // tokens in the model's context so far
	total     int64 // tokens of every conversation record written
	records   int
}

func newWriter(session, cwd string, start time.Time) *writer {
	return &writer{session: session, cwd: cwd, branch: "main", version: "2.0.14", model: "claude-sonnet-4-5-20250929", now: start}
}

// id returns a deterministic UUID-shaped id.
func (w *writer) id(kind string) string {
	w.n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", w.session, kind, w.n)))
	h := fmt.Sprintf("%x", sum)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

func (w *writer) short(prefix string, n int) string {
	w.n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", w.session, prefix, w.n)))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[int(sum[i%32]+byte(i*7))%len(alphabet)]
	}
	return prefix + string(b)
}

func (w *writer) tick(ms int) string {
	w.now = w.now.Add(time.Duration(ms) * time.Millisecond)
	return w.now.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (w *writer) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and structs of strings and numbers are written
	}
	w.buf.Write(b)
	w.buf.WriteByte('\n')
	w.records++
}

// envelope is what every conversation record shares, in Claude Code's field
// order.
type envelope struct {
	ParentUUID        *string `json:"parentUuid"`
	LogicalParentUUID string  `json:"logicalParentUuid,omitempty"`
	IsSidechain       bool    `json:"isSidechain"`
	UserType          string  `json:"userType"`
	Cwd               string  `json:"cwd"`
	SessionID         string  `json:"sessionId"`
	Version           string  `json:"version"`
	GitBranch         string  `json:"gitBranch"`
}

func (w *writer) envelope(parent string) envelope {
	e := envelope{UserType: "external", Cwd: w.cwd, SessionID: w.session, Version: w.version, GitBranch: w.branch}
	if parent != "" {
		p := parent
		e.ParentUUID = &p
	}
	return e
}

type userRecord struct {
	envelope
	Type             string `json:"type"`
	Message          any    `json:"message"`
	IsCompactSummary bool   `json:"isCompactSummary,omitempty"`
	IsVisibleOnly    bool   `json:"isVisibleInTranscriptOnly,omitempty"`
	UUID             string `json:"uuid"`
	Timestamp        string `json:"timestamp"`
	ToolUseResult    any    `json:"toolUseResult,omitempty"`
}

type usage struct {
	InputTokens              int64          `json:"input_tokens"`
	CacheCreationInputTokens int64          `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64          `json:"cache_read_input_tokens"`
	CacheCreation            map[string]int `json:"cache_creation"`
	OutputTokens             int64          `json:"output_tokens"`
	ServiceTier              string         `json:"service_tier"`
}

type assistantMessage struct {
	Model        string  `json:"model"`
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type assistantRecord struct {
	envelope
	Message   assistantMessage `json:"message"`
	RequestID string           `json:"requestId"`
	Type      string           `json:"type"`
	UUID      string           `json:"uuid"`
	Timestamp string           `json:"timestamp"`
}

// tokensOf is the rough estimate (characters / 4) the generator steers by.
func tokensOf(s string) int64 { return int64(len(s)+3) / 4 }

// prompt writes a typed user prompt (string content, as Claude Code stores
// typed prompts), preceded by its file-history snapshot.
func (w *writer) prompt(text string) string {
	u := w.id("user")
	ts := w.tick(3)
	w.write(map[string]any{"type": "file-history-snapshot", "messageId": u,
		"snapshot": map[string]any{"messageId": u, "trackedFileBackups": map[string]any{}, "timestamp": ts}, "isSnapshotUpdate": false})
	w.write(userRecord{envelope: w.envelope(w.parent), Type: "user", Message: map[string]any{"role": "user", "content": text}, UUID: u, Timestamp: w.tick(40000)})
	w.parent = u
	w.ctxTokens += tokensOf(text)
	w.total += tokensOf(text)
	return u
}

// part is one content block of a streamed response.
type part struct {
	block  map[string]any
	toolID string
}

func text(s string) part { return part{block: map[string]any{"type": "text", "text": s}} }

func thinking(s string) part {
	return part{block: map[string]any{"type": "thinking", "thinking": s, "signature": "EqQBCkYIBxgCKkB" + strings.Repeat("x", 24)}}
}

func (w *writer) tool(name string, input map[string]any) part {
	id := w.short("toolu_01", 22)
	return part{block: map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}, toolID: id}
}

// respond writes one API response streamed as one record per block, all
// sharing message.id and requestId, each with the usage so far. It returns
// the ids of its tool_use blocks.
func (w *writer) respond(parts ...part) []string {
	msgID := w.short("msg_01", 22)
	reqID := w.short("req_011C", 20)
	created := w.ctxTokens / 9
	read := w.ctxTokens - created
	var out int64
	var tools []string
	for i, p := range parts {
		u := w.id("assistant")
		switch p.block["type"] {
		case "thinking":
			out += tokensOf(p.block["thinking"].(string))
		case "text":
			out += tokensOf(p.block["text"].(string))
		default:
			b, _ := json.Marshal(p.block["input"])
			out += tokensOf(string(b)) + 12
			tools = append(tools, p.toolID)
		}
		var stop *string
		if i == len(parts)-1 {
			reason := "end_turn"
			if p.toolID != "" {
				reason = "tool_use"
			}
			stop = &reason
		}
		w.write(assistantRecord{
			envelope: w.envelope(w.parent),
			Message: assistantMessage{
				Model: w.model, ID: msgID, Type: "message", Role: "assistant", Content: []any{p.block}, StopReason: stop,
				Usage: usage{InputTokens: 4, CacheCreationInputTokens: created, CacheReadInputTokens: read,
					CacheCreation: map[string]int{"ephemeral_5m_input_tokens": int(created), "ephemeral_1h_input_tokens": 0}, OutputTokens: out, ServiceTier: "standard"},
			},
			RequestID: reqID, Type: "assistant", UUID: u, Timestamp: w.tick(1800 + 400*i),
		})
		w.parent = u
	}
	w.ctxTokens += out
	w.total += out
	return tools
}

// result writes the tool_result of toolID as a user record with Claude
// Code's toolUseResult side data.
func (w *writer) result(toolID, content string, isError bool, side any) {
	u := w.id("result")
	block := map[string]any{"tool_use_id": toolID, "type": "tool_result", "content": content}
	if isError {
		block["is_error"] = true
	}
	w.write(userRecord{envelope: w.envelope(w.parent), Type: "user", Message: map[string]any{"role": "user", "content": []any{block}}, UUID: u, Timestamp: w.tick(900), ToolUseResult: side})
	w.parent = u
	w.ctxTokens += tokensOf(content)
	w.total += tokensOf(content)
}

// numbered renders file content the way the Read tool returns it.
func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
		fmt.Fprintf(&b, "%6d→%s\n", i+1, l)
	}
	return b.String()
}

// read calls Read on path and returns src.
func (w *writer) read(before []part, path, src string) {
	ids := w.respond(append(before, w.tool("Read", map[string]any{"file_path": w.cwd + "/" + path}))...)
	lines := strings.Count(src, "\n")
	w.result(ids[len(ids)-1], numbered(src), false, map[string]any{"type": "text", "file": map[string]any{"filePath": w.cwd + "/" + path, "content": src, "numLines": lines, "startLine": 1, "totalLines": lines}})
}

// edit calls Edit on path.
func (w *writer) edit(before []part, path, old, new string) {
	ids := w.respond(append(before, w.tool("Edit", map[string]any{"file_path": w.cwd + "/" + path, "old_string": old, "new_string": new}))...)
	w.result(ids[len(ids)-1], "The file "+w.cwd+"/"+path+" has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"+numbered(new), false,
		map[string]any{"filePath": w.cwd + "/" + path, "oldString": old, "newString": new, "userModified": false, "replaceAll": false})
}

// create calls Write on path.
func (w *writer) create(before []part, path, content string) {
	ids := w.respond(append(before, w.tool("Write", map[string]any{"file_path": w.cwd + "/" + path, "content": content}))...)
	w.result(ids[len(ids)-1], "File created successfully at: "+w.cwd+"/"+path, false, map[string]any{"type": "create", "filePath": w.cwd + "/" + path, "content": content})
}

// bash runs a command; exit != 0 makes the result an error.
func (w *writer) bash(before []part, command, description, output string, exit int) {
	ids := w.respond(append(before, w.tool("Bash", map[string]any{"command": command, "description": description}))...)
	if exit != 0 {
		w.result(ids[len(ids)-1], fmt.Sprintf("Exit code %d\n%s", exit, output), true, fmt.Sprintf("Error: Exit code %d\n%s", exit, output))
		return
	}
	w.result(ids[len(ids)-1], output, false, map[string]any{"stdout": output, "stderr": "", "interrupted": false, "isImage": false})
}

// grep calls Grep and returns output.
func (w *writer) grep(before []part, pattern, output string) {
	ids := w.respond(append(before, w.tool("Grep", map[string]any{"pattern": pattern, "output_mode": "content", "-n": true}))...)
	w.result(ids[len(ids)-1], output, false, map[string]any{"mode": "content", "numFiles": strings.Count(output, "\n"), "content": output})
}

// compact writes what Claude Code writes when it compacts automatically: a
// compact_boundary, the summary it continues from, and an informational
// line. The context then holds the summary and nothing else.
func (w *writer) compact(summary string) {
	pre := w.ctxTokens
	last := w.parent
	u := w.id("boundary")
	w.write(map[string]any{"parentUuid": nil, "logicalParentUuid": last, "isSidechain": false, "userType": "external", "cwd": w.cwd, "sessionId": w.session,
		"version": w.version, "gitBranch": w.branch, "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": false,
		"timestamp": w.tick(2000), "uuid": u, "level": "info", "compactMetadata": map[string]any{"trigger": "auto", "preTokens": pre}})
	w.parent = u
	s := w.id("summary")
	w.write(userRecord{envelope: w.envelope(w.parent), Type: "user", Message: map[string]any{"role": "user", "content": summary}, IsCompactSummary: true, IsVisibleOnly: true, UUID: s, Timestamp: w.tick(10)})
	w.parent = s
	w.ctxTokens = 16000 + tokensOf(summary) // system prompt, tools and the summary
	w.write(map[string]any{"type": "system", "subtype": "informational", "content": fmt.Sprintf("Context compacted: %d → %d tokens", pre, w.ctxTokens),
		"timestamp": w.tick(5), "uuid": w.id("info"), "level": "info", "isMeta": false, "sessionId": w.session})
}
