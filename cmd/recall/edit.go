package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// editFlags are the strategy flags of recall edit.
type editFlags struct {
	triggerTokens, triggerUses, keep, clearAtLeast *int64
	exclude, thinking                              *string
	clearInputs, noTools                           *bool
}

func addEditFlags(fs *flag.FlagSet) editFlags {
	return editFlags{
		triggerTokens: fs.Int64("trigger-tokens", events.DefaultClearTrigger, "clear tool results once the context holds this many input tokens"),
		triggerUses:   fs.Int64("trigger-tool-uses", 0, "clear once the context holds this many tool uses (replaces --trigger-tokens)"),
		keep:          fs.Int64("keep", events.DefaultKeepToolUses, "most recent tool uses left untouched"),
		clearAtLeast:  fs.Int64("clear-at-least", 0, "clear nothing unless at least this many tokens are freed"),
		exclude:       fs.String("exclude", "", "comma-separated tool names never cleared"),
		clearInputs:   fs.Bool("clear-inputs", false, "clear the inputs of cleared tool uses too"),
		thinking:      fs.String("thinking", "", `also clear thinking: keep the last N turns with thinking, or "all"`),
		noTools:       fs.Bool("no-tools", false, "do not clear tool results (with --thinking: thinking only)"),
	}
}

// management builds the request's strategies from the flags.
func (f editFlags) management() (*events.ContextManagement, error) {
	var cm events.ContextManagement
	if *f.thinking != "" {
		e := events.ContextEdit{Type: events.EditClearThinking, Keep: &events.EditKeep{All: *f.thinking == "all"}}
		if !e.Keep.All {
			n, err := strconv.ParseInt(*f.thinking, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: --thinking must be a number of turns or \"all\", not %q", errUsage, *f.thinking)
			}
			e.Keep.EditAmount = events.EditAmount{Type: events.UnitThinkingTurns, Value: n}
		}
		cm.Edits = append(cm.Edits, e)
	}
	if !*f.noTools {
		e := events.ContextEdit{Type: events.EditClearToolUses, ClearToolInputs: *f.clearInputs,
			Trigger: &events.EditAmount{Type: events.UnitInputTokens, Value: *f.triggerTokens},
			Keep:    &events.EditKeep{EditAmount: events.EditAmount{Type: events.UnitToolUses, Value: *f.keep}}}
		if *f.triggerUses > 0 {
			e.Trigger = &events.EditAmount{Type: events.UnitToolUses, Value: *f.triggerUses}
		}
		if *f.clearAtLeast > 0 {
			e.ClearAtLeast = &events.EditAmount{Type: events.UnitInputTokens, Value: *f.clearAtLeast}
		}
		for _, name := range strings.Split(*f.exclude, ",") {
			if name = strings.TrimSpace(name); name != "" {
				e.ExcludeTools = append(e.ExcludeTools, name)
			}
		}
		cm.Edits = append(cm.Edits, e)
	}
	if err := cm.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return &cm, nil
}

func runEdit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("edit")
	target := addSessionFlags(fs, "session id (required)", "tenant")
	asJSON := fs.Bool("json", false, "print the whole reply as JSON")
	contextTokens := fs.Int64("context-tokens", 0, "the platform's own count of its context (0 = estimate from the transcript)")
	ef := addEditFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := target.validate(true); err != nil {
		return err
	}
	cm, err := ef.management()
	if err != nil {
		return err
	}
	nc, err := dialNATS(*target.natsURL, "recall-edit")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c, err := client.New(js, *target.tenant)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	reply, err := c.Edit(rctx, *target.session, events.EditRequest{ContextManagement: cm, ContextTokens: *contextTokens})
	if err != nil {
		return fmt.Errorf("%w (is the compactor running? try 'recall up')", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reply)
	}
	printEdit(stdout, reply)
	return nil
}

// printEdit writes a human summary of an edit reply.
func printEdit(w io.Writer, r *events.EditReply) {
	fmt.Fprintf(w, "context: ~%s tokens → ~%s after clearing (records %d–%d, %s)\n",
		thousands(r.TokensBefore), thousands(r.TokensAfter), r.FirstSeq, r.LastSeq, fmtDuration(time.Duration(r.DurationUS)*time.Microsecond))
	if len(r.AppliedEdits) == 0 {
		fmt.Fprintln(w, "nothing to clear (no strategy's trigger was reached, or clear_at_least could not be met)")
		return
	}
	for _, a := range r.AppliedEdits {
		fmt.Fprintf(w, "  %s: %d tool uses, %d thinking turns, ~%s tokens\n", a.Type, a.ClearedToolUses, a.ClearedThinkingTurns, thousands(a.ClearedInputTokens))
	}
	for i, c := range r.Clear {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more blocks (--json lists them all)\n", len(r.Clear)-i)
			break
		}
		fmt.Fprintf(w, "  seq %-6d %s block %d: %s %s %s (~%s tokens)\n", c.Seq, c.UUID, c.Block, c.Action, c.Kind, c.ToolName, thousands(c.Tokens))
	}
}
