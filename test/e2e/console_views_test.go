package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// consoleSessionViews checks the views of a session page (acme-s1, open
// on ctx): the transcript viewer with tool pairs, the timeline filter,
// markdown's underscores, and that what a page renders stays text.
func consoleSessionViews(t *testing.T, ctx context.Context) {
	t.Helper()
	err := doWithin(ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#transcript-more")),
		visible(`#transcript li[data-kind="message"] .block.tool_use`), visible(`#transcript li[data-kind="message"] .block.tool_result`))
	if err != nil {
		t.Fatal(pageState(ctx, err))
	}
	first, _ := text(ctx, "#transcript li")
	if !strings.Contains(first, "#1 · stream seq") || !strings.Contains(first, "tokens") {
		t.Fatalf("the transcript's first record: %q", first)
	}
	hide := `(() => { const b = document.querySelector('#timeline-filter input[data-kind="extraction_requested"]'); b.click(); return document.querySelectorAll('#timeline li[data-kind="extraction_requested"]').length * 1000 + document.querySelectorAll('#timeline li').length; })()`
	if n, err := evalInt(ctx, hide); err != nil || n >= 1000 || n == 0 {
		t.Fatalf("the timeline filtered by kind: %d %v", n, err)
	}
	md := `(() => { const d = markdown("a tool_use_error in snake_case, _emphasis_ and *star*\n- <img src=x onerror=\"window.pwned=1\"> <script>window.pwned=1</script>"); return d.innerHTML; })()`
	html, err := evalString(ctx, md)
	if err != nil || !strings.Contains(html, "tool_use_error") || !strings.Contains(html, "<em>emphasis</em>") || strings.Count(html, "<em>") != 2 || strings.Contains(html, "<img") || strings.Contains(html, "<script") {
		t.Fatalf("markdown: %s %v", html, err)
	}
	ref := `(() => { const p = document.createElement("pre"); p.append(...withReferences("see @@auth-refactor and <i>x</i>")); return p.innerHTML; })()`
	if html, err := evalString(ctx, ref); err != nil || html != `see <a class="ref" href="#/?q=auth-refactor">@@auth-refactor</a> and &lt;i&gt;x&lt;/i&gt;` {
		t.Fatalf("an @@reference: %s %v", html, err)
	}
	ref = `(() => { const p = document.createElement("pre"); p.append(...withReferences("ask @@auth.v2.")); return p.innerHTML; })()`
	if html, err := evalString(ctx, ref); err != nil || html != `ask <a class="ref" href="#/?q=auth.v2">@@auth.v2</a>.` {
		t.Fatalf("an @@reference ending a sentence: %s %v", html, err)
	}
	if pwned, _ := evalInt(ctx, `window.pwned ? 1 : 0`); pwned != 0 {
		t.Fatal("markup in a memory ran")
	}
}

// consoleSearchInURL: the sessions search is kept in the address, so a
// reload or a shared link shows the same list.
func consoleSearchInURL(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	if err := login(ctx, base, "tok-acme"); err != nil {
		t.Fatal(err)
	}
	err := doWithin(ctx, 20*time.Second, visible(`tr[data-session="acme-s1"]`), chromedp.SendKeys(chromedp.CSS("#search"), "acme-s1"))
	if err != nil {
		t.Fatal(err)
	}
	testpoll.UntilEvery(t, 10*time.Second, 50*time.Millisecond, "the address #/?q=acme-s1 after a search", func() bool {
		href, _ := evalString(ctx, `location.hash`)
		return href == "#/?q=acme-s1"
	})
	if err := doWithin(ctx, 20*time.Second, chromedp.Reload(), visible(`tr[data-session="acme-s1"]`)); err != nil {
		t.Fatal(pageState(ctx, err))
	}
	if v, _ := evalString(ctx, `document.getElementById("search").value`); v != "acme-s1" {
		t.Fatalf("the search after a reload: %q", v)
	}
}

// consoleUserMemory: a user's long-term memory documents, the newest
// revision rendered and a diff between revisions.
func consoleUserMemory(t *testing.T, ctx context.Context, base string, js jetstream.JetStream) {
	t.Helper()
	bg := context.Background()
	kv, err := js.KeyValue(bg, events.BucketLTM)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"# Profile\n- prefers Go\n- works on the parser", "# Profile\n- prefers Go\n- works on the streaming parser\n- <b>bold</b> stays text"} {
		b, _ := json.Marshal(events.StoredMemoryDocument{Content: content, UpdatedAt: time.Now(), Session: "acme-s1"})
		if _, err := kv.Put(bg, events.LTMKey("acme", "u1", "", "profile"), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := login(ctx, base, "tok-acme"); err != nil {
		t.Fatal(err)
	}
	err = doWithin(ctx, 20*time.Second, visible(`tr[data-session="acme-s1"]`), chromedp.Navigate(base+"/console/#/t/acme/u/u1"),
		visible(`section.document[data-key="acme.u1.self.profile"]`))
	if err != nil {
		t.Fatal(pageState(ctx, err))
	}
	got, _ := evalString(ctx, `document.querySelector("section.document .panel").textContent + " | " + document.querySelectorAll("section.document .diff td.add").length + " | " + document.querySelectorAll("section.document b").length`)
	if !strings.Contains(got, "works on the streaming parser") || !strings.Contains(got, "<b>bold</b>") || !strings.HasSuffix(got, " | 0") || strings.Contains(got, " | 0 | ") {
		t.Fatalf("the user's memory (text | added lines | <b> elements): %q", got)
	}
	screenshot(t, ctx, "user-memory")
}

// consoleOverview: an operator's overview of every tenant.
func consoleOverview(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	if err := doWithin(ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#nav-overview")), visible(`#overview tr[data-tenant="acme"]`), visible(`#overview tr[data-tenant="beta"]`)); err != nil {
		t.Fatal(pageState(ctx, err))
	}
	// The row can be in the page before its cells are filled (or be
	// replaced by a refresh between two reads): wait for its text.
	var row string
	testpoll.Until(t, 20*time.Second, "beta's overview row names beta", func() bool {
		row, _ = text(ctx, `#overview tr[data-tenant="beta"]`)
		return strings.Contains(row, "beta")
	})
	t.Logf("overview of beta: %q", row)
	screenshot(t, ctx, "overview")
}
