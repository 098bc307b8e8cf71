package replyspace_test

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/replyspace"
)

func TestAllowed(t *testing.T) {
	for _, c := range []struct {
		subject, reply string
		want           bool
	}{
		{"recall.api.compact.acme.s1", "_INBOX_TENANT.acme.abc", true},
		{"recall.api.compact.acme.s1", "_INBOX_TENANT.acme.abc.7", true},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme.", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme..x", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme.*", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme.>", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme.a b", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme2.x", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.beta.x", false},
		{"recall.api.memory.acme.s1", "_INBOX_TENANT.acme", false},
		{"recall.api.memory.acme.s1", "_INBOX.x", false},
		{"recall.api.memory.acme.s1", "$JS.API.STREAM.PURGE.RECALL_TRANSCRIPT", false},
		{"recall.api.memory.acme.s1", "$KV.RECALL_MEMORY.beta.s1", false},
		{"recall.api.memory.acme.s1", "recall.transcript.beta.s1", false},
		{"recall.transcript.acme.s1", "_INBOX_TENANT.acme.x", false}, // not an API subject
		{"recall.api.memory.acme.s1.extra", "_INBOX_TENANT.acme.x", false},
		{"recall.api.memory.a.b", "_INBOX_TENANT.a.x", true},
	} {
		if got := replyspace.Allowed(c.subject, c.reply); got != c.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", c.subject, c.reply, got, c.want)
		}
	}
}

func TestInbox(t *testing.T) {
	in := replyspace.Inbox("recall.api.compact.acme.s1")
	if !strings.HasPrefix(in, "_INBOX_TENANT.acme.") || !replyspace.Allowed("recall.api.compact.acme.s1", in) {
		t.Fatalf("Inbox = %q", in)
	}
	if replyspace.Inbox("recall.transcript.acme.s1") != "" {
		t.Fatal("an inbox for a non-API subject")
	}
}
