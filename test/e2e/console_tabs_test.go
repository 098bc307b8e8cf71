package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
)

// consoleTabs opens eight tabs of one browser on the console at once:
// every one renders its data and is live (the tabs share one stream, so
// the browser's six connections per host are not all held by streams);
// a notification reaches all of them; a tab leaving (pagehide, as into
// the back/forward cache) hands the stream over, and rejoins on pageshow.
func consoleTabs(t *testing.T, newTab func() context.Context, base string) {
	const n = 8
	tabs := make([]context.Context, n)
	for i := range tabs {
		tabs[i] = newTab()
		if err := login(tabs[i], base, "tok-beta"); err != nil {
			t.Fatal(err)
		}
	}
	for i, tab := range tabs {
		if err := doWithin(tab, 20*time.Second, visible(`tr[data-session="beta-secret"]`), visible("#live.on")); err != nil {
			t.Fatalf("tab %d: %s", i+1, pageState(tab, err))
		}
	}
	leader := leaderOf(t, tabs)
	postAs(t, base, "tok-beta", workTurn("beta-tabs", "1", "Open eight tabs."))
	for i, tab := range tabs {
		if err := doWithin(tab, 20*time.Second, visible(`tr[data-session="beta-tabs"]`)); err != nil {
			t.Fatalf("tab %d did not update live: %s", i+1, pageState(tab, err))
		}
	}
	// The leader leaves: another tab takes the stream over at once.
	if _, err := evalInt(tabs[leader], `(window.dispatchEvent(new PageTransitionEvent("pagehide", {persisted: true})), 0)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		next := -1
		for i, tab := range tabs {
			if role, _ := evalString(tab, `document.getElementById("live").className + " " + document.getElementById("live").dataset.role`); i != leader && role == "live on leader" {
				next = i
			}
		}
		if next >= 0 {
			t.Logf("tab %d left; tab %d leads after %v", leader+1, next+1, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("no tab took the stream over within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := evalInt(tabs[leader], `(window.dispatchEvent(new PageTransitionEvent("pageshow", {persisted: true})), 0)`); err != nil {
		t.Fatal(err)
	}
	if err := doWithin(tabs[leader], 10*time.Second, visible("#live.on")); err != nil {
		t.Fatal(pageState(tabs[leader], err))
	}
	leaderOf(t, tabs)
}

// leaderOf waits (up to 10 s) for exactly one of tabs to read the stream.
func leaderOf(t *testing.T, tabs []context.Context) int {
	t.Helper()
	var roles []string
	leader := -1
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the tabs' roles: %s", fmt.Sprint(roles))
		}
	})
	testpoll.UntilEvery(t, 10*time.Second, 100*time.Millisecond, "exactly one leader among the tabs", func() bool {
		roles, leader = nil, -1
		for i, tab := range tabs {
			role, _ := evalString(tab, `document.getElementById("live").dataset.role || ""`)
			roles = append(roles, role)
			if role == "leader" {
				leader = i
			}
		}
		return strings.Count(strings.Join(roles, " "), "leader") == 1
	})
	return leader
}
