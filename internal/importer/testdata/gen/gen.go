package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// gen writes Claude Code JSONL records the way Claude Code does: one record
// per line, linked by uuid/parentUuid, streamed responses split into one
// record per content block sharing message.id.
type gen struct {
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
	sidechain bool
	agentID   string
	records   int
}

func newGen(session, cwd string, start time.Time) *gen {
	return &gen{session: session, cwd: cwd, branch: "main", version: "2.0.14", model: "claude-sonnet-4-5-20250929", now: start}
}

// id returns a deterministic UUID-shaped id.
func (g *gen) id(kind string) string {
	g.n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", g.session, kind, g.n)))
	h := fmt.Sprintf("%x", sum)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

func (g *gen) short(prefix string, n int) string {
	g.n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", g.session, prefix, g.n)))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[int(sum[i%32]+byte(i*7))%len(alphabet)]
	}
	return prefix + string(b)
}

func (g *gen) tick(ms int) string {
	g.now = g.now.Add(time.Duration(ms) * time.Millisecond)
	return g.now.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (g *gen) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	g.buf.Write(b)
	g.buf.WriteByte('\n')
	g.records++
}

// base is the envelope every conversation record shares, in Claude Code's
// field order.
type base struct {
	ParentUUID        *string `json:"parentUuid"`
	LogicalParentUUID string  `json:"logicalParentUuid,omitempty"`
	IsSidechain       bool    `json:"isSidechain"`
	UserType          string  `json:"userType"`
	Cwd               string  `json:"cwd"`
	SessionID         string  `json:"sessionId"`
	Version           string  `json:"version"`
	GitBranch         string  `json:"gitBranch"`
	AgentID           string  `json:"agentId,omitempty"`
}

func (g *gen) base(parent string) base {
	b := base{IsSidechain: g.sidechain, UserType: "external", Cwd: g.cwd, SessionID: g.session, Version: g.version, GitBranch: g.branch, AgentID: g.agentID}
	if parent != "" {
		p := parent
		b.ParentUUID = &p
	}
	return b
}

type userRecord struct {
	base
	Type             string `json:"type"`
	Message          any    `json:"message"`
	IsMeta           bool   `json:"isMeta,omitempty"`
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
	base
	Message   assistantMessage `json:"message"`
	RequestID string           `json:"requestId"`
	Type      string           `json:"type"`
	UUID      string           `json:"uuid"`
	Timestamp string           `json:"timestamp"`
}

func tokensOf(s string) int64 { return int64(len(s)+3) / 4 }

// snapshot writes the file-history-snapshot Claude Code records before a
// prompt.
func (g *gen) snapshot(messageID string) {
	ts := g.tick(3)
	g.write(map[string]any{
		"type":      "file-history-snapshot",
		"messageId": messageID,
		"snapshot": map[string]any{
			"messageId":          messageID,
			"trackedFileBackups": map[string]any{},
			"timestamp":          ts,
		},
		"isSnapshotUpdate": false,
	})
}

// prompt writes a user prompt (string content, as Claude Code stores typed
// prompts).
func (g *gen) prompt(text string) string {
	u := g.id("user")
	if !g.sidechain {
		g.snapshot(u)
	}
	g.write(userRecord{base: g.base(g.parent), Type: "user", Message: map[string]any{"role": "user", "content": text}, UUID: u, Timestamp: g.tick(40000)})
	g.parent = u
	g.ctxTokens += tokensOf(text)
	return u
}

// meta writes an isMeta user record (not conversation).
func (g *gen) meta(text string) {
	u := g.id("meta")
	g.write(userRecord{base: g.base(g.parent), Type: "user", Message: map[string]any{"role": "user", "content": text}, IsMeta: true, UUID: u, Timestamp: g.tick(5)})
	g.parent = u
}

// part is one content block of a streamed response.
type part struct {
	block  map[string]any
	toolID string
}

func thinking(text string) part {
	return part{block: map[string]any{"type": "thinking", "thinking": text, "signature": "EqQBCkYIBxgCKkB" + strings.Repeat("x", 24)}}
}

func text(s string) part { return part{block: map[string]any{"type": "text", "text": s}} }

func (g *gen) tool(name string, input map[string]any) part {
	id := g.short("toolu_01", 22)
	return part{block: map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}, toolID: id}
}

// respond writes one API response streamed as one record per block, all
// sharing message.id and requestId, each carrying the usage so far. It
// returns the tool ids of its tool_use blocks and sets the parent to the
// last record.
func (g *gen) respond(parts ...part) []string {
	msgID := g.short("msg_01", 22)
	reqID := g.short("req_011C", 20)
	created := g.ctxTokens / 9
	read := g.ctxTokens - created
	var out int64
	var tools []string
	for i, p := range parts {
		u := g.id("assistant")
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
		g.write(assistantRecord{
			base: g.base(g.parent),
			Message: assistantMessage{
				Model: g.model, ID: msgID, Type: "message", Role: "assistant", Content: []any{p.block}, StopReason: stop,
				Usage: usage{InputTokens: 4, CacheCreationInputTokens: created, CacheReadInputTokens: read,
					CacheCreation: map[string]int{"ephemeral_5m_input_tokens": int(created), "ephemeral_1h_input_tokens": 0}, OutputTokens: out, ServiceTier: "standard"},
			},
			RequestID: reqID, Type: "assistant", UUID: u, Timestamp: g.tick(1800 + 400*i),
		})
		g.parent = u
	}
	g.ctxTokens += out
	return tools
}

// result writes the tool_result of toolID as a user record, with Claude
// Code's toolUseResult side data.
func (g *gen) result(toolID, content string, isError bool, side any) {
	u := g.id("result")
	block := map[string]any{"tool_use_id": toolID, "type": "tool_result", "content": content}
	if isError {
		block["is_error"] = true
	}
	g.write(userRecord{base: g.base(g.parent), Type: "user", Message: map[string]any{"role": "user", "content": []any{block}}, UUID: u, Timestamp: g.tick(900), ToolUseResult: side})
	g.parent = u
	g.ctxTokens += tokensOf(content)
}

// numbered renders file content the way the Read tool returns it.
func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
		fmt.Fprintf(&b, "%6d→%s\n", i+1, l)
	}
	return b.String()
}

// read calls Read on path and returns the file.
func (g *gen) read(before []part, path, src string) {
	ids := g.respond(append(before, g.tool("Read", map[string]any{"file_path": g.cwd + "/" + path}))...)
	lines := strings.Count(src, "\n")
	g.result(ids[len(ids)-1], numbered(src), false, map[string]any{"type": "text", "file": map[string]any{"filePath": g.cwd + "/" + path, "content": src, "numLines": lines, "startLine": 1, "totalLines": lines}})
}

// edit calls Edit; a non-empty failure makes the result an error.
func (g *gen) edit(before []part, path, old, new, failure string) {
	ids := g.respond(append(before, g.tool("Edit", map[string]any{"file_path": g.cwd + "/" + path, "old_string": old, "new_string": new}))...)
	if failure != "" {
		g.result(ids[len(ids)-1], "<tool_use_error>"+failure+"</tool_use_error>", true, "Error: "+failure)
		return
	}
	g.result(ids[len(ids)-1], "The file "+g.cwd+"/"+path+" has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"+numbered(new), false,
		map[string]any{"filePath": g.cwd + "/" + path, "oldString": old, "newString": new, "userModified": false, "replaceAll": false})
}

// bash runs a command; exit != 0 makes the result an error.
func (g *gen) bash(before []part, command, description, output string, exit int) {
	ids := g.respond(append(before, g.tool("Bash", map[string]any{"command": command, "description": description}))...)
	if exit != 0 {
		g.result(ids[len(ids)-1], fmt.Sprintf("Exit code %d\n%s", exit, output), true, fmt.Sprintf("Error: Exit code %d\n%s", exit, output))
		return
	}
	g.result(ids[len(ids)-1], output, false, map[string]any{"stdout": output, "stderr": "", "interrupted": false, "isImage": false})
}
