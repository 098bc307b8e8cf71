package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/services/ingest/console"
)

// TestConsoleLongSessionChart: the chart of a 200,000-record session
// (interleaved with another session's records, compacted every 20,000)
// spans the whole session, first record to last, with every compaction
// on the axis. The console runs alone over an embedded NATS server (no
// pipeline to take the records in), and the records are published
// straight to the session's transcript shard stream. Under the race
// detector, which slows the console's reads about fivefold, the session
// holds 60,000 records.
func TestConsoleLongSessionChart(t *testing.T) {
	n, limit := 200_000, 40*time.Second
	if raceEnabled {
		n, limit = 60_000, 90*time.Second
	}
	shown := fmt.Sprintf("%d,%03d", n/1000, n%1000)
	newTab := browser(t)
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	prov := provision.Config{Partitions: 1}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatal(err)
	}
	first, last := publishLong(t, ctx, js, prov.Layout(), n)
	operator := func(*http.Request) (console.Identity, error) { return console.Identity{Operator: true}, nil }
	con, err := console.New(nc, prov.Layout(), operator, console.Config{Tenants: []string{"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	con.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	t.Cleanup(con.Close)
	tab := newTab()
	start := time.Now()
	if err := doWithin(tab, limit, chromedp.Navigate(hs.URL+"/console/#/t/acme/s/long"), visible("main[data-loaded-ms] #chart svg")); err != nil {
		t.Fatal(pageState(tab, err))
	}
	for records := ""; records != shown; records, _ = text(tab, "#records") {
		if time.Since(start) > limit {
			t.Fatalf("records shown after %v: %q", limit, records)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s-record session page in %v (the first visit reads the whole transcript)", shown, time.Since(start).Round(time.Millisecond))
	got, err := evalString(tab, `(() => { const s = document.querySelector("#chart svg"); const p = s.querySelector("polyline").getAttribute("points").split(" ");
		return [s.dataset.firstSeq, s.dataset.lastSeq, p[0].split(",")[0], p[p.length-1].split(",")[0], s.querySelectorAll(".mark-compaction").length, p.length, document.getElementById("records").textContent].join(" "); })()`)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d %d 60.0 990.0 %d ", first, last, (n-1)/20_000)
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " "+shown) {
		t.Fatalf("chart (first seq, last seq, first x, last x, compactions, points, records): %q, want %q… %s", got, want, shown)
	}
	if n, _ := strconv.Atoi(strings.Fields(got)[5]); n > 601 {
		t.Fatalf("%d points drawn", n)
	}
	screenshot(t, tab, "long-session")
}

// publishLong stores n records of acme/long, every tenth sequence of its
// shard stream another session's (one of the same shard), and returns the
// first and last sequence of long.
func publishLong(t *testing.T, ctx context.Context, js jetstream.JetStream, layout events.Layout, n int) (first, last uint64) {
	t.Helper()
	other := ""
	for i := 0; other == ""; i++ {
		if s := fmt.Sprint("other", i); layout.Shard("acme", s) == layout.Shard("acme", "long") {
			other = s
		}
	}
	stream := layout.Stream("acme", "long")
	msg := func(session string, i int) *event.Event {
		e := event.New()
		e.SetID(fmt.Sprintf("%s-%d", session, i))
		e.SetSource("/test")
		e.SetType(events.TypeMessage)
		_ = e.SetData("application/json", events.Message{UUID: e.ID(), Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: fmt.Sprintf("step %d: run the next migration batch", i)}}})
		if i > 0 && i%20_000 == 0 && session == "long" {
			e.SetType(events.TypeSessionCompacted)
			b, _ := json.Marshal(events.SessionCompacted{PreTokens: 100_000, PostTokens: 2_000})
			_ = e.SetData("application/json", json.RawMessage(b))
		}
		return &e
	}
	var futures []jetstream.PubAckFuture
	wait := func() {
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Stream != stream {
					t.Fatalf("stored in %s, want %s", ack.Stream, stream)
				}
				if first == 0 && strings.HasSuffix(f.Msg().Subject, ".long") {
					first = ack.Sequence
				}
				if strings.HasSuffix(f.Msg().Subject, ".long") {
					last = ack.Sequence
				}
			case err := <-f.Err():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		futures = futures[:0]
	}
	for k, j := 0, 0; j < n; k++ {
		session, i := other, k
		if k%10 != 9 {
			session, i = "long", j
			j++
		}
		f, err := js.PublishMsgAsync(natsce.NewMsg(layout.Subject("acme", session), msg(session, i)))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == 4000 {
			wait()
		}
	}
	wait()
	return first, last
}
