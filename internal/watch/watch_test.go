package watch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

const (
	fixture  = "../importer/testdata/coding-session.jsonl"
	fixture2 = "../importer/testdata/refactor-session.jsonl"
	tenant   = "acme"
	token    = "tok"
)

// recallEnv is a real ingest service (HTTP edge) on an embedded NATS.
type recallEnv struct {
	url    string
	js     jetstream.JetStream
	layout events.Layout // the transcript's shards
}

func startRecall(t *testing.T) *recallEnv {
	t.Helper()
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	pc := provision.Config{Partitions: 1, MemoryStorage: true}
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS:     natsconn.Config{URL: s.ClientURL()},
		Config:   pc,
		HTTPAddr: "127.0.0.1:0",
		Tenants:  tenant + ":" + ingestsvc.HashToken(token),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()); cancel() })
	_, js := s.Connect(t)
	return &recallEnv{url: "http://" + svc.Addr(), js: js, layout: pc.Layout()}
}

// each calls fn with every record of every transcript shard stream.
func (r *recallEnv) each(t *testing.T, fn func(*jetstream.RawStreamMsg)) {
	t.Helper()
	ctx := context.Background()
	for _, name := range r.layout.Streams() {
		st, err := r.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := st.CachedInfo()
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("reading record %d of %s: %v", seq, name, err)
			}
			fn(m)
		}
	}
}

// stored counts the transcript records of session by event id.
func (r *recallEnv) stored(t *testing.T, session string) map[string]int {
	t.Helper()
	subject := r.layout.Subject(tenant, session)
	ids := map[string]int{}
	r.each(t, func(m *jetstream.RawStreamMsg) {
		if m.Subject == subject {
			ids[strings.TrimPrefix(m.Header.Get("Nats-Msg-Id"), tenant+":")]++
		}
	})
	return ids
}

// record returns the stored record of the event id.
func (r *recallEnv) record(t *testing.T, id string) []byte {
	t.Helper()
	var data []byte
	r.each(t, func(m *jetstream.RawStreamMsg) {
		if m.Header.Get("Nats-Msg-Id") == tenant+":"+id {
			data = m.Data
		}
	})
	if data == nil {
		t.Fatalf("no record of event %s", id)
	}
	return data
}

// waitStored waits until exactly the events of lines are stored for
// session, each once.
func (r *recallEnv) waitStored(t *testing.T, session string, lines []byte) {
	t.Helper()
	want := wantIDs(t, session, lines)
	var got map[string]int
	testpoll.Until(t, 30*time.Second, "the events of the lines written", func() bool {
		got = r.stored(t, session)
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("%d events stored, want %d", len(got), len(want))
	}
	for _, id := range want {
		if got[id] != 1 {
			t.Fatalf("event %s stored %d times, want once (stored: %v)", id, got[id], got)
		}
	}
}

// wantIDs are the event ids of importing lines whole.
func wantIDs(t *testing.T, session string, lines []byte) []string {
	t.Helper()
	res, err := importer.ClaudeCode(bytes.NewReader(lines), importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Events))
	for i, e := range res.Events {
		ids[i] = e.ID()
	}
	return ids
}

// claude simulates Claude Code appending a transcript's lines.
type claude struct {
	path  string
	lines [][]byte // each with its newline
	n     int      // lines written whole
	half  bool     // the first half of line n is written
}

func newClaude(t *testing.T, path, from string) *claude {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	return &claude{path: path, lines: bytes.SplitAfter(b, []byte("\n"))}
}

// write appends the next k lines (finishing a half-written one first),
// then half of the following one when half is set.
func (c *claude) write(t *testing.T, k int, half bool) {
	t.Helper()
	var b []byte
	if c.half {
		l := c.lines[c.n]
		b, c.n, k = append(b, l[len(l)/2:]...), c.n+1, k-1
	}
	for ; k > 0 && c.n < len(c.lines); k-- {
		b, c.n = append(b, c.lines[c.n]...), c.n+1
	}
	c.half = half && c.n < len(c.lines)
	if c.half {
		l := c.lines[c.n]
		b = append(b, l[:len(l)/2]...)
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// whole is what was written whole so far.
func (c *claude) whole() []byte { return bytes.Join(c.lines[:c.n], nil) }

// startWatcher runs a watcher until the returned stop is called, which
// fails the test unless Run returned nil.
func startWatcher(t *testing.T, r *recallEnv, dir, state string, pollOnly bool) (*watch.Watcher, func()) {
	t.Helper()
	c := newHTTP(t, client.HTTPConfig{URL: r.url, Token: token, Batch: 7, Window: -1})
	w, err := watch.New(watch.Config{Dir: dir, StatePath: state, Interval: 10 * time.Millisecond, PollOnly: pollOnly,
		Tail: watch.Tail{Sender: c, User: "ada", MaxChunk: 4 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("watcher stopped with %v", err)
		}
	}
}

// TestWatchFollowsALiveTranscript: a transcript written a few lines at a
// time, with a half-written line, through a restart of the watcher, a
// second project appearing, a rotation and a truncation, is stored once,
// event for event — woken by file notifications (the poll every 10 s is
// too slow for the test's deadlines), and by polling alone.
func TestWatchFollowsALiveTranscript(t *testing.T) {
	for _, pollOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "notified", true: "polled"}[pollOnly], func(t *testing.T) {
			followLive(t, pollOnly)
		})
	}
}

func followLive(t *testing.T, pollOnly bool) {
	r := startRecall(t)
	dir, state := t.TempDir(), filepath.Join(t.TempDir(), "watch.json")
	cc := newClaude(t, filepath.Join(dir, "-home-dev-app", "sess-live.jsonl"), fixture)
	w, stop := startWatcher(t, r, dir, state, pollOnly)

	for cc.n < 40 {
		cc.write(t, 3, true)
		r.waitStored(t, "sess-live", cc.whole())
	}
	stop()
	if data := r.record(t, "sess-live-started"); !bytes.Contains(data, []byte(`"user_id":"ada"`)) {
		t.Fatalf("session.started does not name the user: %s", data)
	}
	st, err := watch.LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if off := st.Files[cc.path].Offset; off != int64(len(cc.whole())) {
		t.Fatalf("saved offset %d, want %d (the whole lines)", off, len(cc.whole()))
	}

	// Claude Code goes on while the watcher is down.
	cc.write(t, 50, true)
	w, stop = startWatcher(t, r, dir, state, pollOnly)
	defer func() { stop() }()
	r.waitStored(t, "sess-live", cc.whole())
	if st := w.Stats(); st.Duplicates != 0 {
		t.Fatalf("the restarted watcher sent %d events again, want 0 (it resumes at the saved offset)", st.Duplicates)
	}
	for cc.n < len(cc.lines) {
		cc.write(t, 5, true)
	}
	r.waitStored(t, "sess-live", cc.whole())

	// A new project directory and session appear.
	two := newClaude(t, filepath.Join(dir, "-home-dev-lib", "sess-two.jsonl"), fixture2)
	two.write(t, len(two.lines), false)
	os.WriteFile(filepath.Join(dir, "-home-dev-lib", "not.a.session.jsonl"), cc.whole(), 0o600)
	r.waitStored(t, "sess-two", two.whole())
	testpoll.Until(t, 10*time.Second, "two sessions followed", func() bool { return w.Stats().Sessions == 2 })

	rotateAndTruncate(t, r, w, cc)
}

// rotateAndTruncate replaces the live transcript by a new file (new inode)
// and then truncates it: both are read again from 0 and store nothing new.
func rotateAndTruncate(t *testing.T, r *recallEnv, w *watch.Watcher, cc *claude) {
	all := cc.whole()
	before := w.Stats().Duplicates
	tmp := cc.path + ".new"
	if err := os.WriteFile(tmp, all, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cc.path); err != nil {
		t.Fatal(err)
	}
	n := len(wantIDs(t, "sess-live", all)) - 1 // all but session.started
	testpoll.Until(t, 30*time.Second, "the replaced file read again", func() bool { return w.Stats().Duplicates >= before+n })
	r.waitStored(t, "sess-live", all)

	before = w.Stats().Duplicates
	if err := os.WriteFile(cc.path, bytes.Join(cc.lines[:10], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "the truncated file read again", func() bool { return w.Stats().Duplicates > before })
	r.waitStored(t, "sess-live", all)
}

// TestCatchUpStopsWithoutAdvancing: with Recall unreachable, CatchUp
// returns when its context ends and the offset stays where it was.
func TestCatchUpStopsWithoutAdvancing(t *testing.T) {
	dir := t.TempDir()
	cc := newClaude(t, filepath.Join(dir, "sess-down.jsonl"), fixture)
	cc.write(t, 20, false)
	var failures int
	tail := watch.Tail{Sender: newHTTP(t, client.HTTPConfig{URL: "http://127.0.0.1:1", OnRetry: func(error) { failures++ }})}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st, out, err := tail.CatchUp(ctx, cc.path, watch.FileState{})
	if !errors.Is(err, context.DeadlineExceeded) || st.Offset != 0 || out.Stored != 0 || failures == 0 {
		t.Fatalf("CatchUp against no Recall: state %+v, outcome %+v, %d failures, err %v", st, out, failures, err)
	}
}

func newHTTP(t *testing.T, cfg client.HTTPConfig) *client.HTTP {
	t.Helper()
	c, err := client.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
