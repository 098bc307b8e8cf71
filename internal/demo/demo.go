// Package demo holds the transcript `recall demo` replays: a Claude Code
// session written for Recall (adding a --by-month flag to a small Go CLI,
// "tally"), with many tool calls, a compile error and its fix, a failing
// test and its fix, and a user correction. The JSONL is a copy of the
// importer's fixture internal/importer/testdata/coding-session.jsonl,
// embedded so the demo runs from any working directory.
package demo

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/pkg/events"
)

// Transcript is the Claude Code JSONL of the demo session.
//
//go:embed coding-session.jsonl
var Transcript []byte

// Name describes the transcript in progress output.
const Name = "tally: add monthly totals (Claude Code session)"

// SystemPromptTokens is added to the cache reads of every API usage in the
// transcript. The fixture counts only the conversation; a real Claude Code
// request also carries its system prompt and tool definitions, about this
// many tokens, which is what makes a session of this length cross the
// 10,000-token extraction threshold in practice.
const SystemPromptTokens = 15000

// Import converts the transcript into ingest events for tenant and session,
// with SystemPromptTokens added to every usage.
func Import(tenant, session string) (*importer.Result, error) {
	res, err := importer.ClaudeCode(bytes.NewReader(Transcript), importer.Options{Tenant: tenant, Session: session, Source: "recall/demo"})
	if err != nil {
		return nil, fmt.Errorf("importing the demo transcript: %w", err)
	}
	for i := range res.Events {
		e := &res.Events[i]
		if e.Type() != events.TypeMessage {
			continue
		}
		var m events.Message
		if err := json.Unmarshal(e.Data(), &m); err != nil {
			return nil, fmt.Errorf("decoding demo event %s: %w", e.ID(), err)
		}
		if m.Usage == nil {
			continue
		}
		m.Usage.CacheReadInputTokens += SystemPromptTokens
		if err := e.SetData("application/json", m); err != nil {
			return nil, fmt.Errorf("encoding demo event %s: %w", e.ID(), err)
		}
	}
	return res, nil
}
