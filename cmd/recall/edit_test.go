package main

import (
	"errors"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func TestEditFlagsBuildTheStrategies(t *testing.T) {
	fs := newFlags("edit")
	ef := addEditFlags(fs)
	if err := fs.Parse([]string{"--thinking", "2", "--trigger-tool-uses", "30", "--keep", "5", "--clear-at-least", "4000", "--exclude", "web_search, Read", "--clear-inputs"}); err != nil {
		t.Fatal(err)
	}
	cm, err := ef.management()
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Edits) != 2 || cm.Edits[0].Type != events.EditClearThinking || cm.Edits[0].Keep.Value != 2 {
		t.Fatalf("edits %+v", cm.Edits)
	}
	tools := cm.Edits[1]
	if tools.Trigger.Type != events.UnitToolUses || tools.Trigger.Value != 30 || tools.Keep.Value != 5 || tools.ClearAtLeast.Value != 4000 ||
		len(tools.ExcludeTools) != 2 || tools.ExcludeTools[1] != "Read" || !tools.ClearToolInputs {
		t.Fatalf("clear_tool_uses %+v", tools)
	}

	fs = newFlags("edit")
	ef = addEditFlags(fs)
	_ = fs.Parse([]string{"--thinking", "some"})
	if _, err := ef.management(); !errors.Is(err, errUsage) {
		t.Fatalf("--thinking some: err = %v, want a usage error", err)
	}
	fs = newFlags("edit")
	ef = addEditFlags(fs)
	_ = fs.Parse([]string{"--keep", "-1"})
	if _, err := ef.management(); !errors.Is(err, errUsage) {
		t.Fatalf("--keep -1: err = %v, want a usage error", err)
	}
}
