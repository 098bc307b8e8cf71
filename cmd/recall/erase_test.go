package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/export"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestExportThenErase: recall export writes the session as JSONL the
// importer reads back; recall erase prints a receipt, after which the
// export finds nothing.
func TestExportThenErase(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	pc := provision.Config{Partitions: 2, MemoryStorage: true}
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	for i, role := range []string{events.RoleUser, events.RoleAssistant} {
		e, err := eventpub.Build("test", eventpub.Event{Type: events.TypeMessage, Tenant: "acme", Session: "s1",
			Data: events.Message{UUID: []string{"u1", "a1"}[i], Role: role, Content: events.Content{{Type: events.BlockText, Text: "hello"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, eventpub.Msg(ctx, pc.Layout().Subject("acme", "s1"), &e)); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--session", "s1", "--tenant", "acme", "--nats-url", s.ClientURL()}
	var out bytes.Buffer
	if err := runExport(ctx, args, &out); err != nil {
		t.Fatal(err)
	}
	res, err := importer.ClaudeCode(&out, importer.Options{})
	if err != nil || res.Session != "s1" || res.Counts["user"] != 1 || res.Counts["assistant"] != 1 {
		t.Fatalf("the export imports as %+v, %v", res, err)
	}
	out.Reset()
	if err := runErase(ctx, args, &out); err != nil {
		t.Fatal(err)
	}
	var r events.EraseReceipt
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Count(pc.Layout().Stream("acme", "s1"), "transcript") != 2 {
		t.Fatalf("receipt %s: %v", out.String(), err)
	}
	if err := runExport(ctx, args, &out); !errors.Is(err, export.ErrNotFound) {
		t.Fatalf("export after the erase: %v", err)
	}
	if err := runErase(ctx, []string{"--session", "s1", "--user", "u"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("both --session and --user: %v", err)
	}
}
