package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/services/ingest/console"
)

// TestConsoleBackForwardCache navigates a console page away and back
// five times for real (no synthetic pagehide): each time the browser
// restores the page from its back/forward cache — the page's JavaScript
// state survives — and the edge's own count of open live streams
// (whoami's live_streams) is 0 while the page is away and 1 once it is
// back, never more; afterwards a parked-list call answers at once (it
// took 58.6 s when cached pages kept their streams and with them the
// browser's six connections per host). The console runs alone over an
// embedded NATS server.
func TestConsoleBackForwardCache(t *testing.T) {
	newTab := browser(t)
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prov := provision.Config{Partitions: 1}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatal(err)
	}
	auth := func(r *http.Request) (console.Identity, error) {
		if r.Header.Get("Authorization") == "Bearer tok-bf" {
			return console.Identity{Tenant: "acme"}, nil
		}
		return console.Identity{}, errors.New("unknown token")
	}
	con, err := console.New(nc, prov.Layout(), auth, console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	con.Register(mux)
	mux.HandleFunc("GET /elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>elsewhere</title><p id=elsewhere>Another page of the same site.</p>")
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	t.Cleanup(con.Close)

	tab := newTab()
	var notCached bfcacheMisses
	_ = chromedp.Listen(tab, notCached.listen)
	if err := login(tab, hs.URL, "tok-bf"); err != nil {
		t.Fatal(err)
	}
	if err := doWithin(tab, 20*time.Second, visible("#sessions"), visible("#live.on")); err != nil {
		t.Fatal(pageState(tab, err))
	}
	streams := func() int { return liveStreams(t, hs.URL, "tok-bf") }
	testpoll.Until(t, 10*time.Second, "one live stream", func() bool { return streams() == 1 })
	for round := 1; round <= 5; round++ {
		if _, err := evalInt(tab, fmt.Sprintf(`(window.bfcacheRound = %d)`, round)); err != nil {
			t.Fatal(err)
		}
		if err := doWithin(tab, 20*time.Second, chromedp.Navigate(hs.URL+"/elsewhere"), visible("#elsewhere")); err != nil {
			t.Fatal(pageState(tab, err))
		}
		testpoll.Until(t, 5*time.Second, fmt.Sprintf("round %d: no live stream while the page is away", round), func() bool { return streams() == 0 })
		if _, err := evalInt(tab, `(history.back(), 0)`); err != nil {
			t.Fatal(err)
		}
		// Back on the console, the page's JavaScript state tells a page
		// restored from the cache from one loaded again.
		var back string
		testpoll.Until(t, 10*time.Second, fmt.Sprintf("round %d: the console page back", round), func() bool {
			c, cancel := context.WithTimeout(tab, 2*time.Second)
			defer cancel()
			back, _ = evalString(c, `location.pathname + " " + (window.bfcacheRound || "none")`)
			return strings.HasPrefix(back, "/console/ ")
		})
		if back != fmt.Sprintf("/console/ %d", round) {
			t.Fatalf("round %d: the page was loaded again (%q), not restored from the back/forward cache: %s", round, back, notCached.String())
		}
		// chromedp's DOM queries do not follow a restored document, so
		// the page is asked with JavaScript.
		testpoll.Until(t, 10*time.Second, fmt.Sprintf("round %d: the restored page live", round), func() bool { return jsTrue(tab, `!!document.querySelector("#live.on")`) })
		testpoll.Until(t, 5*time.Second, fmt.Sprintf("round %d: one live stream again", round), func() bool { return streams() == 1 })
		if n := streams(); n != 1 {
			t.Fatalf("round %d: %d live streams open for one restored page", round, n)
		}
	}
	ms, err := evalInt(tab, `(async () => { const t0 = performance.now(); const r = await fetch("/console/api/parked", {headers: {Authorization: "Bearer tok-bf"}}); await r.json(); return r.ok ? Math.round(performance.now() - t0) : -r.status; })()`)
	if err != nil || ms < 0 || ms > 2000 {
		t.Fatalf("a parked-list call after five round trips through the back/forward cache: %d ms (%v)", ms, err)
	}
	if _, err := evalInt(tab, `(location.hash = "#/parked", 0)`); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the parked page", func() bool { return jsTrue(tab, `!!document.querySelector("#parked")`) })
	t.Logf("five round trips through the back/forward cache, one live stream throughout; a parked-list call then took %d ms", ms)
}

// jsTrue evaluates a boolean expression on tab, false when it cannot.
func jsTrue(tab context.Context, expr string) bool {
	c, cancel := context.WithTimeout(tab, 2*time.Second)
	defer cancel()
	ok, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
	return err == nil && ok
}

// liveStreams is the edge's count of the live streams open for token's
// tenant (whoami's live_streams).
func liveStreams(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/console/api/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who struct {
		LiveStreams int `json:"live_streams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		t.Fatal(err)
	}
	return who.LiveStreams
}

// bfcacheMisses keeps why the browser did not keep a page in its
// back/forward cache (Page.backForwardCacheNotUsed), for a failure
// message.
type bfcacheMisses struct {
	sync.Mutex
	reasons []string
}

func (m *bfcacheMisses) listen(ev any) {
	e, ok := ev.(*page.EventBackForwardCacheNotUsed)
	if !ok {
		return
	}
	m.Lock()
	defer m.Unlock()
	for _, r := range e.NotRestoredExplanations {
		m.reasons = append(m.reasons, fmt.Sprintf("%s (%s)", r.Reason, r.Type))
	}
}

func (m *bfcacheMisses) String() string {
	m.Lock()
	defer m.Unlock()
	if len(m.reasons) == 0 {
		return "the browser gave no reason"
	}
	return "not cached because: " + strings.Join(m.reasons, ", ")
}
