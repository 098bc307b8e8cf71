package transcript

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// publishStub stores msg's data as an object under the name object (the
// session's own when empty) and publishes its stub, event <session>-<id>,
// as ingest does; sum overrides the stub's digest when not empty.
func publishStub(t *testing.T, js jetstream.JetStream, session, id, object, sum string, msg events.Message, put bool) {
	t.Helper()
	ctx := context.Background()
	data, _ := json.Marshal(msg)
	digest := sha256.Sum256(data)
	if sum == "" {
		sum = hex.EncodeToString(digest[:])
	}
	preview, _ := json.Marshal(events.PreviewMessage(&msg))
	e := eventtest.NewSession("t1", session).Event(id, events.TypeMessage, json.RawMessage(preview))
	if object == "" {
		object = events.BlobName("t1", session, e.ID(), sum)
	}
	if put {
		obs, err := js.ObjectStore(ctx, events.BucketBlobs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.PutBytes(ctx, object, data); err != nil {
			t.Fatal(err)
		}
	}
	events.ClaimCheck{Object: object, Size: int64(len(data)), SHA256: sum, Tokens: 4242}.SetOn(&e)
	eventtest.Publish(ctx, t, js, testLayout, e)
}

func bigMessage(uuid string) events.Message {
	return events.Message{UUID: uuid, Role: events.RoleUser, Content: events.Content{
		{Type: events.BlockText, Text: "BEGIN " + strings.Repeat("é log line\n", 20000) + " END"},
		{Type: events.BlockToolResult, ToolUseID: "t1", Content: events.Content{{Type: events.BlockText, Text: strings.Repeat("x", 5000)}}},
	}}
}

// TestClaimCheckResolve: a Reader returns a stub's whole message with the
// claim-check attributes removed; Stubs and Decode leave the preview with
// its ClaimCheck; a stub naming another session's object, one whose digest
// does not match, and one whose object is gone are told apart.
func TestClaimCheckResolve(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, testConfig); err != nil {
		t.Fatal(err)
	}
	full := bigMessage("u-big")
	publishStub(t, js, "ok", "e1", "", "", full, true)
	publishStub(t, js, "gone", "e2", "", "", full, false)
	publishStub(t, js, "other", "e3", events.BlobName("t1", "ok", "ok-e1", strings.Repeat("0", 64)), "", full, false)
	publishStub(t, js, "tampered", "e4", "", strings.Repeat("ab", 32), full, true)

	r := NewReader(nc, testLayout)
	recs, err := r.Read(ctx, "t1", "ok", 0, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	got := recs[0]
	if got.ClaimCheck != nil || got.Message == nil || got.Message.Content[0].Text != full.Content[0].Text || got.Message.Content[1].Content[0].Text != full.Content[1].Content[0].Text {
		t.Fatalf("resolved record: claim check %v, message not the full one", got.ClaimCheck)
	}
	if _, ok := got.Event.Extensions()[events.ExtBlob]; ok || got.Seq == 0 || got.Subject == "" {
		t.Fatalf("resolved record keeps %s or lost its position: %+v", events.ExtBlob, got.Event.Extensions())
	}

	stubs, err := r.Stubs().Read(ctx, "t1", "ok", 0, 0, 0)
	if err != nil || len(stubs) != 1 || stubs[0].ClaimCheck == nil || stubs[0].ClaimCheck.Tokens != 4242 {
		t.Fatalf("Stubs: %+v, %v", stubs, err)
	}
	if text := stubs[0].Message.Content[0].Text; len(text) > events.PreviewChars || !strings.HasPrefix(text, "BEGIN é") {
		t.Fatalf("preview text of %d bytes: %.40q", len(text), text)
	}

	gone, err := r.Read(ctx, "t1", "gone", 0, 0, 0)
	if err != nil || len(gone) != 1 || gone[0].ClaimCheck == nil {
		t.Fatalf("a stub whose object is gone is kept as a stub: %v", err)
	}
	for _, session := range []string{"other", "tampered"} {
		if _, err := r.Read(ctx, "t1", session, 0, 0, 0); !errors.Is(err, ErrBadClaimCheck) {
			t.Errorf("%s: %v, want ErrBadClaimCheck", session, err)
		}
	}
}

// TestPreviewMessage: the preview keeps the message's fields and block
// shape, cuts long strings on a rune boundary and drops large inputs.
func TestPreviewMessage(t *testing.T) {
	m := bigMessage("u1")
	m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: "t2", Name: "Bash", Input: json.RawMessage(`{"command":"` + strings.Repeat("y", 4000) + `"}`)})
	p := events.PreviewMessage(&m)
	if p.UUID != "u1" || len(p.Content) != 3 || p.Content.ToolUses() != 1 || string(p.Content[2].Input) != "{}" {
		t.Fatalf("preview shape: %+v", p)
	}
	if !strings.HasPrefix(m.Content[0].Text, p.Content[0].Text) || len(p.Content[0].Text) > events.PreviewChars || !utf8.ValidString(p.Content[0].Text) {
		t.Fatalf("preview text: %d bytes", len(p.Content[0].Text))
	}
	if len(m.Content[0].Text) < 100000 {
		t.Fatal("the original was modified")
	}
}
