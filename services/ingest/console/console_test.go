package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/services/ingest/console"
)

// tokens: "a" is tenant acme, "b" tenant beta, "op" an operator.
func testAuth(r *http.Request) (console.Identity, error) {
	switch r.Header.Get("Authorization") {
	case "Bearer a":
		return console.Identity{Tenant: "acme"}, nil
	case "Bearer b":
		return console.Identity{Tenant: "beta"}, nil
	case "Bearer op":
		return console.Identity{Operator: true}, nil
	}
	return console.Identity{}, errors.New("missing or unknown bearer token")
}

type fixture struct {
	con    *console.Console
	url    string
	js     jetstream.JetStream
	nc     *nats.Conn
	layout events.Layout // the transcript's shards
}

func start(t *testing.T, mods ...func(*console.Config)) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pc := provision.Config{Partitions: 2}
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{Tenants: []string{"beta", "acme", "acme"}, Timeout: time.Second}
	for _, mod := range mods {
		mod(&cfg)
	}
	c, err := console.New(nc, pc.Layout(), testAuth, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &fixture{con: c, url: hs.URL, js: js, nc: nc, layout: pc.Layout()}
}

// say stores a user message in the transcript, binary mode.
func (f *fixture) say(t *testing.T, tenant, session, id, text string) {
	t.Helper()
	e := event.New()
	e.SetID(id)
	e.SetSource("/test")
	e.SetType(events.TypeMessage)
	_ = e.SetData("application/json", events.Message{UUID: id, Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}})
	if _, err := f.js.PublishMsg(context.Background(), natsce.NewMsg(f.layout.Subject(tenant, session), &e)); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) get(t *testing.T, method, path, token, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(strings.TrimPrefix(body, "!")))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == "POST" && !strings.HasPrefix(body, "!") {
		req.Header.Set("Content-Type", "application/json")
	}
	body = strings.TrimPrefix(body, "!")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestConsoleAPI(t *testing.T) {
	f := start(t)
	f.say(t, "acme", "s1", "m1", "Make the parser stream tokens.")
	f.say(t, "acme", "s1", "m2", "And add a benchmark.")
	f.say(t, "acme", "s2", "m1", "Rename the module.")
	f.say(t, "beta", "secret", "m1", "Rotate the keys.")

	var who struct {
		Tenant   string
		Operator bool
		Tenants  []string
	}
	if code := f.get(t, "GET", "/console/api/whoami", "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("whoami without a token: %d", code)
	}
	if f.get(t, "GET", "/console/api/whoami", "op", "", &who); !who.Operator || strings.Join(who.Tenants, ",") != "acme,beta" {
		t.Fatalf("operator: %+v", who)
	}
	var list struct {
		Sessions []struct {
			Session string
			Records int
		}
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions", "a", "", &list); code != 200 || len(list.Sessions) != 2 || list.Sessions[0].Session != "s2" || list.Sessions[1].Records != 2 {
		t.Fatalf("acme's sessions: %d %+v", code, list)
	}
	if f.get(t, "GET", "/console/api/tenants/acme/sessions?q=S1", "a", "", &list); len(list.Sessions) != 1 || list.Sessions[0].Session != "s1" {
		t.Fatalf("search: %+v", list)
	}
	// Memory, index and extraction state join the list from the buckets.
	ctx := context.Background()
	mem, _ := f.js.KeyValue(ctx, events.BucketMemory)
	rev, err := mem.Put(ctx, "acme.s1", []byte(`{"notes":"# Notes","last_summarized_seq":1,"covered_seq":1,"extractions":1,"usage":{"input_tokens":1,"output_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := f.js.KeyValue(ctx, events.BucketIndex)
	if _, err := ix.Put(ctx, "acme.s1", []byte(`{"tenant":"acme","session":"s1","name":"streaming-parser","tags":["parser"]}`)); err != nil {
		t.Fatal(err)
	}
	var joined struct {
		Sessions []struct {
			Session        string
			MemoryRevision uint64 `json:"memory_revision"`
			Name           string
			Tags           []string
		}
	}
	f.get(t, "GET", "/console/api/tenants/acme/sessions?q=parser", "a", "", &joined)
	if len(joined.Sessions) != 1 || joined.Sessions[0].MemoryRevision != rev || joined.Sessions[0].Name != "streaming-parser" {
		t.Fatalf("joined list: %+v (memory revision %d)", joined, rev)
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/console/api/tenants/beta/sessions", "a", http.StatusForbidden},
		{"/console/api/tenants/beta/sessions/secret", "a", http.StatusForbidden},
		{"/console/api/tenants/beta/sessions", "op", http.StatusOK},
		{"/console/api/tenants/a.b/sessions", "op", http.StatusBadRequest},
		{"/console/api/tenants/acme/sessions/nope", "a", http.StatusNotFound},
		{"/console/api/tenants/acme/sessions/bad.id", "a", http.StatusBadRequest},
		{"/console/api/tenants/acme/sessions", "", http.StatusUnauthorized},
	} {
		if code := f.get(t, "GET", c.path, c.token, "", nil); code != c.want {
			t.Errorf("GET %s as %q: %d, want %d", c.path, c.token, code, c.want)
		}
	}
	var page struct {
		Records int
		Series  []struct{ Seq, Tokens int64 }
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/s1", "a", "", &page); code != 200 || page.Records != 2 || len(page.Series) != 2 || page.Series[1].Tokens <= page.Series[0].Tokens {
		t.Fatalf("session page: %d %+v", code, page)
	}
	// A new record reaches a page that was read before (the cached series
	// is extended, not reused as it was).
	f.say(t, "acme", "s1", "m3", "Then ship it.")
	if f.get(t, "GET", "/console/api/tenants/acme/sessions/s1", "a", "", &page); page.Records != 3 || len(page.Series) != 3 {
		t.Fatalf("after a new record: %+v", page)
	}
	if code := f.get(t, "POST", "/console/api/tenants/acme/sessions/s1/preview", "a", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("preview without a compactor: %d", code)
	}
}

func TestConsoleParked(t *testing.T) {
	f := start(t)
	kv, err := f.js.KeyValue(context.Background(), events.BucketParked)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "beta"} {
		p := &parked.Parked{Request: events.ExtractionRequested{Tenant: tenant, Session: "s1", UpToSeq: 7}, Reason: "provider_error", Error: "529", ParkedAt: time.Now()}
		if err := parked.Put(context.Background(), kv, p); err != nil {
			t.Fatal(err)
		}
	}
	var got struct {
		Parked    []parked.Parked
		CanReplay bool `json:"can_replay"`
	}
	if f.get(t, "GET", "/console/api/parked?tenant=beta", "a", "", &got); len(got.Parked) != 1 || got.Parked[0].Request.Tenant != "acme" || got.CanReplay {
		t.Fatalf("a tenant's parked list: %+v", got)
	}
	if f.get(t, "GET", "/console/api/parked", "op", "", &got); len(got.Parked) != 2 || !got.CanReplay {
		t.Fatalf("the operator's parked list: %+v", got)
	}
	if code := f.get(t, "POST", "/console/api/parked/replay", "a", `{"tenant":"acme","session":"s1"}`, nil); code != http.StatusForbidden {
		t.Fatalf("a tenant replaying: %d", code)
	}
	for _, body := range []string{`{"tenant":"acme"}`, `{"tenant":"a b","session":"s1"}`, `not json`} {
		if code := f.get(t, "POST", "/console/api/parked/replay", "op", body, nil); code != http.StatusBadRequest {
			t.Fatalf("replay %s: %d", body, code)
		}
	}
	// A cross-site form post (text/plain, no preflight) is refused.
	if code := f.get(t, "POST", "/console/api/parked/replay", "op", `!{"tenant":"acme","session":"s1"}`, nil); code != http.StatusUnsupportedMediaType {
		t.Fatalf("replay without a JSON content type: %d", code)
	}
	var replayed struct{ Replayed int }
	if code := f.get(t, "POST", "/console/api/parked/replay", "op", `{"tenant":"acme","session":"s1"}`, &replayed); code != 200 || replayed.Replayed != 1 {
		t.Fatalf("replay: %d %+v", code, replayed)
	}
	st, _ := f.js.Stream(context.Background(), events.StreamExtract)
	if info, _ := st.Info(context.Background()); info.State.Msgs != 1 {
		t.Fatalf("the replayed request is not queued: %d messages", info.State.Msgs)
	}
	if f.get(t, "GET", "/console/api/parked", "op", "", &got); len(got.Parked) != 1 || got.Parked[0].Request.Tenant != "beta" {
		t.Fatalf("after the replay: %+v", got)
	}
}

// TestConsoleParkedCommits: parked long-term memory commits are listed
// beside parked extractions (a tenant sees its own) and an operator
// replays them by kind.
func TestConsoleParkedCommits(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	state, err := f.js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "beta"} {
		p := &parked.Commit{Tenant: tenant, User: "u1", Session: "s1", Reason: events.CommitReasonSessionEnded, UpTo: 9, Error: "529", Attempts: 5, ParkedAt: time.Now()}
		if err := parked.PutCommit(ctx, state, p); err != nil {
			t.Fatal(err)
		}
	}
	var got struct {
		Parked  []parked.Parked
		Commits []parked.Commit
	}
	if f.get(t, "GET", "/console/api/parked", "a", "", &got); len(got.Parked) != 0 || len(got.Commits) != 1 || got.Commits[0].Tenant != "acme" {
		t.Fatalf("a tenant's parked commits: %+v", got)
	}
	if code := f.get(t, "POST", "/console/api/parked/replay", "op", `{"tenant":"acme","session":"s1","kind":"other"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("a replay of an unknown kind: %d", code)
	}
	var replayed struct{ Replayed int }
	if code := f.get(t, "POST", "/console/api/parked/replay", "op", `{"tenant":"acme","session":"s1","kind":"commit"}`, &replayed); code != 200 || replayed.Replayed != 1 {
		t.Fatalf("replay: %d %+v", code, replayed)
	}
	st, _ := f.js.Stream(ctx, events.StreamCommits)
	if info, _ := st.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("the replayed commit is not queued: %d messages", info.State.Msgs)
	}
	if f.get(t, "GET", "/console/api/parked", "op", "", &got); len(got.Commits) != 1 || got.Commits[0].Tenant != "beta" {
		t.Fatalf("after the replay: %+v", got)
	}
}

// TestConsoleLive: the live stream carries the tenant's notifications and
// no other tenant's.
func TestConsoleLive(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/console/api/live?tenant=beta", nil)
	req.Header.Set("Authorization", "Bearer a") // a tenant cannot ask for another's
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, ": recall live") {
		t.Fatalf("first line %q", line)
	}
	for _, tenant := range []string{"beta", "acme"} {
		if _, err := f.js.Publish(ctx, events.EventsSubject(events.KindExtractionCompleted, tenant, "s1"), fmt.Appendf(nil, `{"tenant":%q,"revision":3}`, tenant)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if line = strings.TrimSpace(line); line != "" {
			got = append(got, line)
		}
	}
	want := []string{"event: extraction_completed", `data: {"tenant":"acme","session":"s1","data":{"tenant":"acme","revision":3}}`}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("stream: %q, want %q", got, want)
	}
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// TestConsoleCloseEndsLiveStreams: Close (registered for the HTTP server's
// shutdown) ends open live streams, so they do not hold a graceful
// shutdown until its deadline.
func TestConsoleCloseEndsLiveStreams(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/console/api/live", nil)
	req.Header.Set("Authorization", "Bearer op")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f.con.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the stream stayed open after Close")
	}
}

// TestConsoleManySessions: a tenant with more sessions than one multi_last
// read answers (1,024), stored across every shard, is listed whole, page
// by page (cursor) in the order of the session ids whatever their shard,
// each page most recently active first.
func TestConsoleManySessions(t *testing.T) {
	f := start(t)
	const n = 1100
	shards := map[int]int{}
	for i := range n {
		f.say(t, "acme", fmt.Sprintf("s%04d", i), "m1", "hello")
		shards[f.layout.Shard("acme", fmt.Sprintf("s%04d", i))]++
	}
	if len(shards) != f.layout.Shards() || f.layout.Shards() < 2 {
		t.Fatalf("sessions per shard %v: the test needs sessions in every one of several shards", shards)
	}
	f.say(t, "acme", "s0003", "m2", "the newest record")
	type page struct {
		Sessions []struct {
			Session string
			Records int
		}
		Total      int
		NextCursor string `json:"next_cursor"`
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var p page
		if code := f.get(t, "GET", "/console/api/tenants/acme/sessions?limit=500&cursor="+cursor, "a", "", &p); code != 200 || p.Total != n {
			t.Fatalf("page %d: status %d, total %d", pages+1, code, p.Total)
		}
		if pages == 0 && (p.Sessions[0].Session != "s0003" || p.Sessions[0].Records != 2 || p.Sessions[1].Session != "s0499") {
			t.Fatalf("first page not the most recently active first: %v", p.Sessions[:3])
		}
		for _, s := range p.Sessions {
			if seen[s.Session] {
				t.Fatalf("%s listed twice", s.Session)
			}
			seen[s.Session] = true
			// Page k holds the sessions s[500k, 500k+500).
			if i, _ := strconv.Atoi(strings.TrimPrefix(s.Session, "s")); i/500 != pages {
				t.Fatalf("page %d lists %s", pages+1, s.Session)
			}
		}
		pages++
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("%d sessions in %d pages, want %d in 3", len(seen), pages, n)
	}
	var p page
	if f.get(t, "GET", "/console/api/tenants/acme/sessions?q=s109", "a", "", &p); len(p.Sessions) != 10 || p.NextCursor != "" {
		t.Fatalf("search over every page: %d rows, cursor %q", len(p.Sessions), p.NextCursor)
	}
}

// TestConsoleLiveStreamsAreBounded: one tenant cannot hold more than 16
// live streams open.
func TestConsoleLiveStreamsAreBounded(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(token string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/console/api/live", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode
	}
	for i := range 16 {
		if code := open("a"); code != http.StatusOK {
			t.Fatalf("stream %d: %d", i+1, code)
		}
	}
	if code := open("a"); code != http.StatusTooManyRequests {
		t.Fatalf("stream 17: %d, want 429", code)
	}
	if code := open("b"); code != http.StatusOK {
		t.Fatalf("another tenant's stream: %d", code)
	}
}
