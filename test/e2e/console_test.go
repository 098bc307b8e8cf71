package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// chromium finds the browser the console tests drive. Without one the tests
// skip, unless RECALL_REQUIRE_BROWSER is set (CI installs Debian's
// chromium and sets it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RECALL_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium found and RECALL_REQUIRE_BROWSER is set (apt-get install chromium)")
	}
	t.Skip("no Chromium on this machine (apt-get install chromium); the console's browser tests need it")
	return ""
}

// browser starts a headless Chromium; each returned context is a fresh
// tab with its own session storage.
func browser(t *testing.T) (tab func() context.Context) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	// The first context starts the browser; the others are its tabs.
	first, cancelFirst := chromedp.NewContext(alloc)
	t.Cleanup(cancelFirst)
	if err := chromedp.Do(first); err != nil {
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return func() context.Context {
		ctx, cancel := chromedp.NewContext(first)
		t.Cleanup(cancel)
		_ = chromedp.Listen(ctx, func(ev any) {
			var line string
			switch e := ev.(type) {
			case *runtime.EventExceptionThrown:
				line = "exception: " + e.ExceptionDetails.Text
				if e.ExceptionDetails.Exception != nil {
					line += " " + e.ExceptionDetails.Exception.Description
				}
			case *runtime.EventConsoleAPICalled:
				line = "console." + string(e.Type) + ":"
				for _, a := range e.Args {
					line += " " + string(a.Value) + a.Description
				}
			default:
				return
			}
			browserLog.Lock()
			browserLog.lines = append(browserLog.lines, line)
			browserLog.Unlock()
		})
		return ctx
	}
}

// screenshot saves the page as docs/console/<name>.png when
// RECALL_CONSOLE_SCREENSHOTS names a directory, else in the test's
// temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("RECALL_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// screenshotOf saves the element css selects, as screenshot saves the
// page.
func screenshotOf(t *testing.T, ctx context.Context, name, css string) {
	t.Helper()
	dir := os.Getenv("RECALL_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func postAs(t *testing.T, url, token string, evs []map[string]any) {
	t.Helper()
	body, _ := json.Marshal(evs)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest answered %d", resp.StatusCode)
	}
}

// workTurn is a turn that crosses the test pipeline's extraction
// thresholds: a long request, a tool call with a large result, an answer.
func workTurn(session, id, ask string) []map[string]any {
	long := strings.Repeat(ask+" ", 30)
	return []map[string]any{
		message(session, id+"u", events.RoleUser, "", events.Block{Type: events.BlockText, Text: long}),
		message(session, id+"a", events.RoleAssistant, "tool_use", events.Block{Type: events.BlockToolUse, ID: "t-" + id, Name: "Read", Input: json.RawMessage(`{"file_path":"parser.go"}`)}),
		message(session, id+"r", events.RoleUser, "", events.Block{Type: events.BlockToolResult, ToolUseID: "t-" + id, Content: events.Content{{Type: events.BlockText, Text: strings.Repeat("func parse() {}\n", 400)}}}),
		message(session, id+"e", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "Done: " + ask}),
	}
}

// evalInt runs a JavaScript expression (awaiting a promise) for a number.
func evalInt(ctx context.Context, js string) (int, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
}

func evalString(ctx context.Context, js string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
}

// text is the visible text of the element css selects.
func text(ctx context.Context, css string) (string, error) {
	return chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
}

func login(ctx context.Context, base, token string) error {
	return doWithin(ctx, time.Minute, chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
}

// browserLog keeps the browser's console messages and exceptions.
var browserLog struct {
	sync.Mutex
	lines []string
}

// pageState describes the page for a failure message.
func pageState(ctx context.Context, err error) string {
	c, cancel := context.WithTimeout(ctx, 5*time.Second) // a hung page must not hang the report
	defer cancel()
	html, herr := chromedp.Run(c, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	browserLog.Lock()
	defer browserLog.Unlock()
	return fmt.Sprintf("%v; the page (%v):\n%s\nbrowser console:\n%s", err, herr, html, strings.Join(browserLog.lines, "\n"))
}

// waitFor waits up to 20 s for css to be visible.
func waitFor(ctx context.Context, css string) error {
	return doWithin(ctx, 20*time.Second, visible(css))
}

func visible(css string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(css))
}

// TestConsoleInABrowser drives the console in headless Chromium: a tenant
// sees its sessions and no other tenant's, a session page shows the memory,
// chart, timeline, revisions and a compaction preview, a new extraction
// appears live within 2 s, the page's parent, children and references,
// the tokens and cost per extraction, the transcript with the blocks a
// context edit would clear; an operator sees every tenant and replays a
// parked extraction that a tenant may only look at.
func TestConsoleInABrowser(t *testing.T) {
	newTab := browser(t)
	p, srv := startPipeline(t, func(c *ingestsvc.Config) {
		c.Tenants = "acme:" + ingestsvc.HashToken("tok-acme") + ",beta:" + ingestsvc.HashToken("tok-beta")
		c.OperatorTokens = ingestsvc.HashToken("tok-operator")
	})
	nc, js := srv.Connect(t)
	completed := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(events.EventsSubject(events.KindExtractionCompleted, "acme", "acme-s1"), completed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	postAs(t, p.httpURL, "tok-acme", workTurn("acme-s1", "1", "Make the parser stream tokens."))
	postAs(t, p.httpURL, "tok-beta", workTurn("beta-secret", "1", "Rotate the beta signing keys."))
	select {
	case <-completed:
	case <-time.After(30 * time.Second):
		t.Fatal("no extraction of acme-s1")
	}
	t.Run("a tenant sees its own sessions only", func(t *testing.T) { consoleTenantView(t, newTab(), p.httpURL) })
	t.Run("a session page, updated live", func(t *testing.T) { consoleSessionLive(t, newTab(), p.httpURL, completed, js) })
	t.Run("the search is kept in the address", func(t *testing.T) { consoleSearchInURL(t, newTab(), p.httpURL) })
	t.Run("eight tabs at once, all live", func(t *testing.T) { consoleTabs(t, newTab, p.httpURL) })
	t.Run("a user's long-term memory", func(t *testing.T) { consoleUserMemory(t, newTab(), p.httpURL, js) })
	t.Run("an operator sees every tenant and replays a parked extraction", func(t *testing.T) {
		consoleParked(t, newTab, p.httpURL, js)
	})
	t.Run("a 10,000-record session page", func(t *testing.T) { consoleBigSession(t, newTab, p.httpURL) })
}

func consoleTenantView(t *testing.T, ctx context.Context, base string) {
	if err := login(ctx, base, "tok-acme"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, `tr[data-session="acme-s1"]`); err != nil {
		t.Fatal(pageState(ctx, err))
	}
	main, err := text(ctx, "#main")
	if err != nil || strings.Contains(main, "beta-secret") {
		t.Fatalf("acme's console lists beta's session (%v):\n%s", err, main)
	}
	screenshot(t, ctx, "sessions")
	if status, err := evalInt(ctx, `fetch("/console/api/tenants/beta/sessions", {headers: {Authorization: "Bearer tok-acme"}}).then(r => r.status)`); err != nil || status != http.StatusForbidden {
		t.Fatalf("acme reading beta's sessions: %d %v", status, err)
	}
	if status, err := evalInt(ctx, `fetch("/console/api/tenants/acme/sessions").then(r => r.status)`); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("no token: %d %v", status, err)
	}
	if status, err := evalInt(ctx, `fetch("/console/api/parked/replay", {method: "POST", headers: {Authorization: "Bearer tok-acme"}, body: '{"tenant":"acme","session":"acme-s1"}'}).then(r => r.status)`); err != nil || status != http.StatusForbidden {
		t.Fatalf("a tenant replaying: %d %v", status, err)
	}
}

func consoleSessionLive(t *testing.T, ctx context.Context, base string, completed <-chan *nats.Msg, js jetstream.JetStream) {
	if err := login(ctx, base, "tok-acme"); err != nil {
		t.Fatal(err)
	}
	err := doWithin(ctx, time.Minute, visible(`tr[data-session="acme-s1"] a`), chromedp.Click(chromedp.CSS(`tr[data-session="acme-s1"] a`)),
		visible(`#timeline li[data-kind="extraction_completed"]`))
	if err != nil {
		t.Fatal(err)
	}
	memoryText, _ := text(ctx, "#memory")
	revBefore, _ := text(ctx, "#kv-revision")
	marks, _ := evalInt(ctx, `document.querySelectorAll("svg polyline, svg .mark-extraction").length`)
	if !strings.Contains(memoryText, "stream tokens") || marks < 2 {
		t.Fatalf("memory %q, chart elements %d", memoryText, marks)
	}
	if err := doWithin(ctx, time.Minute, chromedp.Click(chromedp.CSS("#preview-button")), visible("#preview .badge")); err != nil {
		t.Fatal(err)
	}
	// The operator picks the oldest revision on both sides: a live update
	// must keep that choice, and the open preview.
	pick := `(() => { for (const id of ["rev-left", "rev-right"]) { const s = document.getElementById(id); s.value = "0"; s.dispatchEvent(new Event("change")); } return document.querySelector("#rev-right option:checked").textContent; })()`
	chosen, err := evalString(ctx, pick)
	if err != nil {
		t.Fatal(err)
	}
	// Live: another turn, another extraction; the page shows it.
	postAs(t, base, "tok-acme", workTurn("acme-s1", "2", "Add a benchmark for the streaming parser."))
	var done time.Time
	select {
	case <-completed:
		done = time.Now()
	case <-time.After(30 * time.Second):
		t.Fatal("no second extraction")
	}
	for {
		revAfter, _ := text(ctx, "#kv-revision")
		if strings.HasPrefix(revAfter, "r") && revAfter != revBefore {
			t.Logf("live update: %q → %q within %v of extraction.completed", revBefore, revAfter, time.Since(done).Round(time.Millisecond))
			break
		}
		if time.Since(done) > 2*time.Second {
			t.Fatalf("the page still shows %q 2 s after the extraction completed", revAfter)
		}
		time.Sleep(50 * time.Millisecond)
	}
	kept, _ := evalString(ctx, `document.querySelector("#rev-right option:checked").textContent + " | " + document.querySelectorAll("#preview .badge").length + " | " + document.querySelectorAll("#rev-right option").length`)
	if !strings.HasPrefix(kept, chosen+" | 1 | ") || strings.HasSuffix(kept, " | 1") {
		t.Fatalf("after the live update: %q (chosen %q, want the choice, the preview and a new revision kept)", kept, chosen)
	}
	last := `(() => { const s = document.getElementById("rev-right"); s.value = String(s.options.length - 1); s.dispatchEvent(new Event("change")); return 0; })()`
	if _, err := evalInt(ctx, last); err != nil {
		t.Fatal(err)
	}
	if added, err := evalInt(ctx, `document.querySelectorAll("#diff td.add").length`); err != nil || added == 0 {
		t.Fatalf("the revisions diff shows no added lines: %d %v", added, err)
	}
	consoleSessionViews(t, ctx)
	consoleSessionLinks(t, ctx, base, js) // and the screenshots of the page and its transcript
}

func consoleParked(t *testing.T, newTab func() context.Context, base string, js jetstream.JetStream) {
	kv, err := js.KeyValue(context.Background(), events.BucketParked)
	if err != nil {
		t.Fatal(err)
	}
	p1 := &parked.Parked{Request: events.ExtractionRequested{Tenant: "beta", Session: "beta-secret", UpToSeq: 3, Reason: "threshold"},
		Reason: "provider_error", Error: "the model answered 529 overloaded three times", Attempts: 3, ParkedAt: time.Now().UTC()}
	if err := parked.Put(context.Background(), kv, p1); err != nil {
		t.Fatal(err)
	}
	p2 := &parked.Parked{Request: events.ExtractionRequested{Tenant: "beta", Session: "beta-other", UpToSeq: 9, Reason: "threshold"},
		Reason: "provider_error", Error: "timeout", Attempts: 3, ParkedAt: time.Now().UTC()}
	if err := parked.Put(context.Background(), kv, p2); err != nil {
		t.Fatal(err)
	}
	// A request whose record lacks its tenant: parked as invalid.<seq>,
	// listed under the tenant and session its subject names.
	lost := &parked.Parked{Request: events.ExtractionRequested{UpToSeq: 5}, Reason: "invalid", Error: "tenant: must not be empty",
		Subject: events.SubjectExtractPartitioned + ".0.beta.beta-lost", StreamSeq: 77, ParkedAt: time.Now().UTC()}
	if err := parked.Put(context.Background(), kv, lost); err != nil {
		t.Fatal(err)
	}
	// A tenant may look, not act.
	tab := newTab()
	if err := login(tab, base, "tok-beta"); err != nil {
		t.Fatal(err)
	}
	if err := doWithin(tab, time.Minute, visible(`tr[data-session="beta-secret"]`), chromedp.Navigate(base+"/console/#/parked"), visible("table#parked")); err != nil {
		t.Fatal(err)
	}
	if main, _ := text(tab, "#main"); !strings.Contains(main, "529 overloaded") || strings.Contains(main, "Replay") || !strings.Contains(main, "beta-lost") || !strings.Contains(main, "invalid record") {
		t.Fatalf("beta's parked page:\n%s", main)
	}
	if count, _ := text(tab, "#parked-count"); count != "3" {
		t.Fatalf("the navigation counts %q parked", count)
	}
	ctx := newTab()
	if err := login(ctx, base, "tok-operator"); err != nil {
		t.Fatal(err)
	}
	err = doWithin(ctx, time.Minute, visible("#tenant"), chromedp.SetValue(chromedp.CSS("#tenant"), "beta"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("tenant").dispatchEvent(new Event("change"))`),
		visible(`tr[data-session="beta-secret"]`), chromedp.Navigate(base+"/console/#/parked"), visible("table#parked button"))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "parked")
	if err := doWithin(ctx, time.Minute, chromedp.Click(chromedp.CSS("table#parked button")), visible("table#parked .badge.ok")); err != nil {
		t.Fatal(err)
	}
	if main, _ := text(ctx, "#main"); !strings.Contains(main, "replayed 1") {
		t.Fatalf("replay:\n%s", main)
	}
	if _, err := kv.Get(context.Background(), p1.Key); err == nil {
		t.Fatal("the replayed request is still parked")
	}
	// Replay all: the rest that can be replayed (not the invalid one).
	if err := doWithin(ctx, time.Minute, chromedp.Click(chromedp.CSS("#replay-all")), chromedp.WaitNotPresent(chromedp.CSS("#replay-all")), visible(`tr[data-key="`+lost.Key+`"]`)); err != nil {
		t.Fatal(pageState(ctx, err))
	}
	if _, err := kv.Get(context.Background(), p2.Key); err == nil {
		t.Fatal("replay all left a request parked")
	}
	consoleOverview(t, ctx, base)
}

func consoleBigSession(t *testing.T, newTab func() context.Context, base string) {
	const n = 10000
	for b := 0; b < n/1000; b++ {
		var evs []map[string]any
		for i := range 1000 {
			k := b*1000 + i
			role, say := events.RoleUser, fmt.Sprintf("step %d: run the next migration batch", k)
			if k%2 == 1 {
				role, say = events.RoleAssistant, fmt.Sprintf("batch %d migrated, 120 rows", k)
			}
			evs = append(evs, message("acme-big", fmt.Sprintf("m%d", k), role, "", events.Block{Type: events.BlockText, Text: say}))
		}
		postAs(t, base, "tok-acme", evs)
	}
	ctx := openSessions(t, newTab, base)
	// Measured once the pipeline has taken the 10,000 records in (the
	// trigger read them and no extraction runs), as an operator opens a
	// page; the numbers under load are in docs/console.md.
	quiet, last := time.Now().Add(15*time.Second), ""
	for time.Now().Before(quiet) {
		row, _ := text(ctx, `tr[data-session="acme-big"]`)
		if row == last && strings.Contains(row, "10,000") && !strings.Contains(row, "extracting") {
			break
		}
		last = row
		time.Sleep(time.Second)
		_ = doWithin(ctx, 20*time.Second, chromedp.Navigate(base+"/console/#/?q=acme-big"), visible(`tr[data-session="acme-big"]`))
	}
	t.Logf("the session before the measurement: %s", last)
	var best time.Duration
	var records, ms, first string
	for visit := 0; visit < 3; visit++ { // the first visit warms the connection
		start := time.Now()
		if err := doWithin(ctx, time.Minute, chromedp.Navigate(base+"/console/#/t/acme/s/acme-big"), visible("main[data-loaded-ms]")); err != nil {
			// A headless renderer under the race detector has hung here
			// once in many runs (a DevTools call never answered): one
			// more try in a fresh tab, then the page's state.
			t.Logf("visit %d: %v; again in a new tab", visit, err)
			ctx = openSessions(t, newTab, base)
			start = time.Now()
			if err := doWithin(ctx, time.Minute, chromedp.Navigate(base+"/console/#/t/acme/s/acme-big"), visible("main[data-loaded-ms]")); err != nil {
				t.Fatal(pageState(ctx, err))
			}
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
		if first == "" {
			a, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("main"), "data-loaded-ms"))
			first = a.Value
		}
		records, _ = text(ctx, "#records")
		a, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("main"), "data-loaded-ms"))
		f, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("main"), "data-fetch-ms"))
		ms = a.Value + " ms (of which fetching " + f.Value + " ms)"
		_ = doWithin(ctx, 20*time.Second, chromedp.Navigate(base+"/console/#/"), visible(`tr[data-session="acme-big"]`))
	}
	if records != "10,000" {
		t.Fatalf("records shown: %q", records)
	}
	if timing, err := evalString(ctx, `fetch("/console/api/tenants/acme/sessions/acme-big", {headers: {Authorization: "Bearer tok-acme"}}).then(r => r.headers.get("Server-Timing"))`); err == nil {
		t.Logf("server timing of the page's data: %s", timing)
	}
	t.Logf("10,000-record session page: first visit fetched and rendered in %s ms; later visits (cached series) %s; navigation to rendered %v (best of 3)", first, ms, best.Round(time.Millisecond))
}

// openSessions logs acme in on a new tab and waits for its sessions list
// to show acme-big.
func openSessions(t *testing.T, newTab func() context.Context, base string) context.Context {
	t.Helper()
	ctx := newTab()
	if err := login(ctx, base, "tok-acme"); err != nil {
		t.Fatal(err)
	}
	if err := doWithin(ctx, time.Minute, visible(`tr[data-session="acme-big"]`)); err != nil {
		t.Fatal(pageState(ctx, err))
	}
	return ctx
}

// doWithin runs steps on ctx's tab, giving up after d.
func doWithin(ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(c, steps...)
}
