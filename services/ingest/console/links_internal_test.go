package console

import (
	"fmt"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestParseReferencesReadsWhatTheIndexerWrites: the console reads back
// the sessions of memory.SessionReferenceText (the indexer's
// <session-references> message), so the two cannot drift apart unseen.
func TestParseReferencesReadsWhatTheIndexerWrites(t *testing.T) {
	text := memory.SessionReferenceText([]memory.ReferenceItem{
		{Ref: "auth", Session: "s-auth", Name: "auth", Description: "## not a heading (session x)", Summary: "Moved auth to tokens.", Question: "why?", Answer: "speed"},
		{Ref: "auth~2", Session: "s-older", Ancestor: 2},
		{Ref: "s-plain", Session: "s-plain"},
	})
	got := fmt.Sprint(parseReferences(text))
	want := "[{s-auth auth  0 0} {s-older  auth~2 2 0} {s-plain   0 0}]"
	if got != want {
		t.Fatalf("parsed %s, want %s\nfrom:\n%s", got, want, text)
	}
}

// TestAddRefsKeepsEachSessionOnce: a written reference the indexer
// resolved is shown once, as its session; one it did not stays as
// written; the list is bounded.
func TestAddRefsKeepsEachSessionOnce(t *testing.T) {
	user := func(text string) *events.Message {
		return &events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}}
	}
	var refs []related
	refs = addRefs(refs, user("see @@auth and @@gone"), 1) // written before it was resolved
	refs = addRefs(refs, user(memory.SessionReferenceText([]memory.ReferenceItem{{Ref: "auth", Session: "s-auth", Name: "auth"}})), 2)
	refs = addRefs(refs, user("@@s-auth again"), 3)
	refs = addRefs(refs, &events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: "@@assistant-said"}}}, 4)
	if got, want := fmt.Sprint(refs), "[{s-auth auth auth 0 2} {  gone 0 1}]"; got != want {
		t.Fatalf("refs %s, want %s", got, want)
	}
	for i := range 2 * maxRefs {
		refs = addRefs(refs, user(fmt.Sprintf("@@r%d", i)), uint64(10+i))
	}
	if len(refs) != maxRefs {
		t.Fatalf("%d refs kept", len(refs))
	}
}
