package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// Without tenants, `recall up` serves NATS without authentication, so it
// refuses any address but loopback.
func TestUpRefusesOpenNATSOffLoopback(t *testing.T) {
	t.Setenv("RECALL_TENANTS", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := Start(context.Background(), Options{DataDir: t.TempDir(), NATSListen: "0.0.0.0:0", Log: log})
	if err == nil || !strings.Contains(err.Error(), "refusing to serve NATS without authentication on 0.0.0.0:0") {
		t.Fatalf("err = %v", err)
	}
	for _, ok := range []string{"127.0.0.1:4222", "localhost:4222", "[::1]:4222", ""} {
		if err := checkOpenListen(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// With tenants, the embedded server authenticates with the generated users:
// the credentials file is private, an anonymous client is refused, a tenant
// reaches its own sessions' API (served by services running as their own
// users) and not the other tenant's replies; a restart reuses the users.
func TestUpWithTenantsAuthenticates(t *testing.T) {
	t.Setenv("RECALL_TENANTS", "acme:"+ingestsvc.HashToken("tok-a")+",beta:"+ingestsvc.HashToken("tok-b"))
	t.Setenv("RECALL_OPERATOR_TOKENS", ingestsvc.HashToken("tok-op"))
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()
	st, err := Start(ctx, Options{DataDir: dir, NATSListen: "127.0.0.1:0", HTTPAddr: httpAddr, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fi, err := os.Stat(filepath.Join(dir, CredentialsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	if nc, err := nats.Connect(st.NATSURL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
	pw := func(name string) string { return st.Auth.Conn(natsconn.Config{}, name).Password }
	acme, err := nats.Connect(st.NATSURL, nats.UserInfo("tenant-acme", pw("tenant-acme")), nats.CustomInboxPrefix(natsperm.InboxPrefix("acme")), nats.PermissionErrOnSubscribe(true))
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	var reply *nats.Msg
	request := func(verb, scope string, body []byte) func() bool {
		return func() bool {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			defer rcancel()
			reply, err = chunked.Request(rctx, acme, events.APISubject(verb, "acme", scope), nil, body)
			return err == nil
		}
	}
	testpoll.Until(t, 30*time.Second, "the extractor answering acme", request(events.VerbMemory, "s1", nil)) // it may still be starting
	if reply.Header.Get("Nats-Service-Error-Code") != "404" {
		t.Fatalf("acme's memory request: %v %v", reply, err)
	}
	// The indexer, running as its own user, answers the tenant too.
	sessions := request(events.VerbSessions, events.TenantScope, []byte(`{}`))
	testpoll.Until(t, 30*time.Second, "the indexer answering acme", func() bool {
		return sessions() && reply.Header.Get("Nats-Service-Error-Code") == ""
	})
	if err != nil || reply.Header.Get("Nats-Service-Error-Code") != "" || !strings.Contains(string(reply.Data), `"sessions":[]`) {
		t.Fatalf("acme's session list: %v %v", reply, err)
	}
	// Long-term memory, running as its own user, queues the commit point
	// of acme's session on RECALL_COMMITS and commits it from its
	// partition.
	committed, err := acme.SubscribeSync(events.EventsSubject(events.KindMemoryCommitted, "acme", "ltm1"))
	if err != nil {
		t.Fatal(err)
	}
	ltm1 := eventtest.NewSession("", "ltm1")
	batch, err := json.Marshal([]event.Event{ltm1.Started("a1", events.SessionStarted{UserID: "u1"}), ltm1.User("m1", "I prefer short answers."), ltm1.Ended("a3")})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	reply, err = chunked.Request(rctx, acme, events.APISubject(events.VerbIngest, "acme", "ltm1"), nil, batch)
	rcancel()
	if err != nil || reply.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("acme's ingest: %v %v", reply, err)
	}
	if m, err := committed.NextMsg(30 * time.Second); err != nil || !strings.Contains(string(m.Data), `"success":true`) {
		t.Fatalf("acme's commit: %v %v", m, err)
	}
	// The console, served by ingest as its own NATS user, reads the
	// buckets and streams, follows notifications and replays.
	consoleGet := func(method, path, token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+httpAddr+path, strings.NewReader(`{"tenant":"acme","session":"ltm1"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ method, path, token, want string }{
		{"GET", "/console/api/tenants/acme/sessions", "tok-a", `"session":"ltm1"`},
		{"GET", "/console/api/tenants/acme/sessions/ltm1", "tok-a", `"records":3`},
		{"GET", "/console/api/parked", "tok-op", `"can_replay":true`},
		{"POST", "/console/api/parked/replay", "tok-op", `"replayed":0`},
	} {
		if code, body := consoleGet(c.method, c.path, c.token); code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Fatalf("console %s %s: %d %s", c.method, c.path, code, body)
		}
	}
	// The live stream as the operator (every tenant), then a compaction of
	// acme's session: its notification arrives.
	lctx, lcancel := context.WithTimeout(ctx, 15*time.Second)
	defer lcancel()
	lreq, _ := http.NewRequestWithContext(lctx, "GET", "http://"+httpAddr+"/console/api/live", nil)
	lreq.Header.Set("Authorization", "Bearer tok-op")
	lresp, err := http.DefaultClient.Do(lreq)
	if err != nil {
		t.Fatal(err)
	}
	defer lresp.Body.Close()
	lines := liveLines(lctx, lresp.Body)
	<-lines // ": recall live"
	// The stream relays a notification: its subscription is registered.
	admin, err := nats.Connect(st.NATSURL, nats.UserInfo(AdminUser, pw(AdminUser)))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	testpoll.Until(t, 10*time.Second, "a probe notification on the operator's live stream", func() bool {
		_ = admin.Publish(events.EventsSubject("probe", "acme", "live-probe"), []byte(`{}`))
		return nextLine(lines, 100*time.Millisecond, "event: probe")
	})
	tc := time.Now()
	if _, err := chunked.Request(lctx, acme, events.APISubject(events.VerbCompact, "acme", "ltm1"), nil, []byte(`{"wait_timeout_ms":0}`)); err != nil {
		t.Fatal(err)
	}
	if !nextLine(lines, 15*time.Second, "event: compaction_served") {
		t.Fatal("no compaction_served on the operator's live stream")
	}
	t.Logf("compaction_served on the live stream %v after the request", time.Since(tc))
	sub, err := acme.SubscribeSync(natsperm.InboxPrefix("beta") + ".>")
	if err == nil {
		if _, err = sub.NextMsg(2 * time.Second); err == nil || !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("acme subscribed to beta's inbox: %v", err)
		}
	}
	before := pw("tenant-beta")
	acme.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := loadOrCreateAuth(dir, []string{"acme", "beta"})
	if err != nil || a.Conn(natsconn.Config{}, "tenant-beta").Password != before {
		t.Fatalf("restart changed the credentials: %v", err)
	}
}

// liveLines are the lines of a live stream's body, read until it ends or
// ctx is done (then the channel is closed).
func liveLines(ctx context.Context, body io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		r := bufio.NewReader(body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case ch <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// nextLine reads lines until one starts with prefix (true) or d passes
// without one or the stream ends (false).
func nextLine(lines <-chan string, d time.Duration, prefix string) bool {
	timeout := time.After(d)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return false
			}
			if strings.HasPrefix(line, prefix) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
