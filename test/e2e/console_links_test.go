package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// consoleSessionLinks checks the session page's links and costs (acme-s1,
// open on ctx, two turns extracted): its parent and children from the
// session index, the sessions it referenced with @@ (one the indexer
// resolved, one it did not), names kept as text; the tokens and cost of
// each extraction; and the transcript viewer marking the blocks a context
// edit would clear, at the tenant's settings (nothing, the context is
// small) and with a trigger and keep given on the page.
func consoleSessionLinks(t *testing.T, ctx context.Context, base string, js jetstream.JetStream) {
	t.Helper()
	bg := context.Background()
	ix, err := js.KeyValue(bg, events.BucketIndex)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []events.SessionIndex{
		{Session: "acme-s1", Name: "streaming-parser", ParentSession: "acme-epic", Summary: "Make the parser stream tokens, then benchmark it."},
		{Session: "acme-epic", Name: "parser-epic"},
		{Session: "acme-child", Name: `child <img src=x onerror="window.pwned=1">`, ParentSession: "acme-s1"},
	} {
		e.Tenant = "acme"
		b, _ := json.Marshal(e)
		if _, err := ix.Put(bg, events.MemoryKey("acme", e.Session), b); err != nil {
			t.Fatal(err)
		}
	}
	refs := memory.SessionReferenceText([]memory.ReferenceItem{{Ref: "parser-epic", Session: "acme-epic", Name: "parser-epic", Summary: "The parser's plan."}})
	postAs(t, base, "tok-acme", []map[string]any{
		message("acme-s1", "ref-ctx", events.RoleUser, "", events.Block{Type: events.BlockText, Text: refs}),
		message("acme-s1", "ref-ask", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "As @@parser-epic planned; see also @@nowhere."}),
	})
	err = doWithin(ctx, 30*time.Second, chromedp.Reload(), visible(`#parent a[data-session="acme-epic"]`), visible(`#children a[data-session="acme-child"]`),
		visible(`#references a[data-session="acme-epic"]`), visible(`#references a.ref`), visible(`#usage-per-extraction tr[data-revision]`))
	if err != nil {
		t.Fatal(pageState(ctx, err))
	}
	got, _ := evalString(ctx, `["parent", "children", "references"].map(id => document.getElementById(id).textContent).join(" | ")`)
	if !strings.Contains(got, "parser-epic (acme-epic)") || !strings.Contains(got, `child <img src=x onerror="window.pwned=1"> (acme-child)`) ||
		!strings.Contains(got, "@@nowhere (not resolved by the indexer)") || strings.Count(got, "parser-epic (acme-epic)") != 2 {
		t.Fatalf("parent | children | references: %q", got)
	}
	if pwned, _ := evalInt(ctx, `window.pwned ? 1 : document.querySelectorAll("#children img").length`); pwned != 0 {
		t.Fatal("markup in a session's name ran")
	}
	rows, _ := evalString(ctx, `[...document.querySelectorAll("#usage-per-extraction tr[data-revision]")].map(r => r.textContent).join("\n")`)
	if !strings.Contains(rows, "offline-v1") || !strings.Contains(rows, "$0.0000") {
		t.Fatalf("the tokens and cost per extraction:\n%s", rows)
	}
	if err := doWithin(ctx, 30*time.Second, chromedp.Click(chromedp.CSS("#preview-button")), visible("#preview .badge")); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "session")
	consoleContextEdit(t, ctx)
}

// consoleContextEdit: the transcript viewer asks what a context edit
// would clear and marks it; the first turn's tool result is cleared when
// one tool use is kept past 1,000 tokens, the second's is kept.
func consoleContextEdit(t *testing.T, ctx context.Context) {
	t.Helper()
	err := doWithin(ctx, 30*time.Second, chromedp.Click(chromedp.CSS("#edit-button")), visible("#edit-result .badge"), visible(`#transcript li[data-kind="message"]`))
	if err != nil {
		t.Fatal(pageState(ctx, err))
	}
	if res, _ := text(ctx, "#edit-result"); !strings.Contains(res, "nothing to clear") || !strings.Contains(res, "tenant's settings") {
		t.Fatalf("a context edit at the tenant's settings (the API's defaults, 100,000 tokens): %q", res)
	}
	err = doWithin(ctx, 30*time.Second, chromedp.SendKeys(chromedp.CSS("#edit-trigger"), "1000"), chromedp.SendKeys(chromedp.CSS("#edit-keep"), "1"),
		chromedp.Click(chromedp.CSS("#edit-button")), visible(`#transcript .block.tool_result.cleared`))
	if err != nil {
		t.Fatal(pageState(ctx, err))
	}
	marks, _ := evalString(ctx, `[...document.querySelectorAll("#transcript .block.tool_result")].map(b => b.dataset.tool + "=" + (b.dataset.cleared || "kept")).join(" ")`)
	if marks != "t-1=tool_result t-2=kept" {
		t.Fatalf("the tool results marked: %q", marks)
	}
	if res, _ := text(ctx, "#edit-result"); !strings.Contains(res, "1 tool result") || !strings.Contains(res, "with these settings") {
		t.Fatalf("the context edit's summary: %q", res)
	}
	screenshotOf(t, ctx, "transcript", "#transcript-view")
}
