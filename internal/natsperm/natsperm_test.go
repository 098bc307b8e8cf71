package natsperm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

const (
	tenantA  = "acme"
	tenantB  = "globex"
	adminPwd = "admin-pw"
)

func password(user string) string { return "pw-" + user }

// env is a server configured with an admin, the two tenant users and the
// service users.
type env struct {
	srv    *natstest.Server
	admin  *nats.Conn
	layout events.Layout // the transcript's shards
}

// startFromOptions configures users through server.Options.
func startFromOptions(t *testing.T) *env {
	t.Helper()
	users := []*server.User{{Username: "admin", Password: adminPwd}}
	for _, tn := range []string{tenantA, tenantB} {
		u, err := natsperm.Tenant(tn, "")
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, u.ServerUser(password(u.Name)))
	}
	for _, u := range natsperm.AllServices() {
		users = append(users, u.ServerUser(password(u.Name)))
	}
	return newEnv(t, natstest.StartWith(t, &server.Options{Users: users}))
}

// startFromConf configures users through the generated configuration text,
// loaded by the server's own parser.
func startFromConf(t *testing.T) *env {
	t.Helper()
	var entries []string
	entries = append(entries, fmt.Sprintf("{ user: admin, password: %q }", adminPwd))
	add := func(u natsperm.User) {
		t.Setenv(u.PasswordEnv(), password(u.Name))
		entries = append(entries, u.Conf("", u.PasswordEnv()))
	}
	for _, tn := range []string{tenantA, tenantB} {
		u, err := natsperm.Tenant(tn, "")
		if err != nil {
			t.Fatal(err)
		}
		add(u)
	}
	for _, u := range natsperm.AllServices() {
		add(u)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\nauthorization {\n  users = [\n%s\n  ]\n}\n",
		filepath.Join(dir, "js"), strings.Join(entries, "\n"))
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("loading generated configuration: %v\n%s", err, conf)
	}
	return newEnv(t, natstest.StartWith(t, o))
}

func newEnv(t *testing.T, s *natstest.Server) *env {
	t.Helper()
	admin, js := s.Connect(t, nats.UserInfo("admin", adminPwd))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc := provision.Config{Partitions: 2}
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	return &env{srv: s, admin: admin, layout: pc.Layout()}
}

// conn is a client connection that records asynchronous errors
// (permission violations arrive that way).
type conn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []error
}

func (e *env) connect(t *testing.T, user string, opts ...nats.Option) *conn {
	t.Helper()
	c := &conn{}
	opts = append([]nats.Option{
		nats.UserInfo(user, password(user)),
		nats.PermissionErrOnSubscribe(true),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}),
	}, opts...)
	c.nc, c.js = e.srv.Connect(t, opts...)
	return c
}

func (e *env) tenant(t *testing.T, tenant string) *conn {
	return e.connect(t, "tenant-"+tenant, nats.CustomInboxPrefix(natsperm.InboxPrefix(tenant)))
}

// waitViolation waits for an asynchronous permission violation naming
// subject.
func (c *conn) waitViolation(t *testing.T, op, subject string) {
	t.Helper()
	want := strings.ToLower(fmt.Sprintf("permissions violation for %s to %q", op, subject))
	testpoll.Until(t, 5*time.Second, want, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.ContainsFunc(c.errs, func(err error) bool { return strings.Contains(strings.ToLower(err.Error()), want) })
	})
}

// subjectCount is the number of records stored on a transcript subject,
// read from its shard stream.
func subjectCount(t *testing.T, admin *nats.Conn, subject string) uint64 {
	t.Helper()
	k, _, _, ok := events.ParseTranscriptSubject(subject)
	if !ok {
		t.Fatalf("%s is not a transcript subject", subject)
	}
	js, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.TranscriptShardStream(k))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

func TestTenantIsolation(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *env{"options": startFromOptions, "conf": startFromConf} {
		t.Run(name, func(t *testing.T) { testIsolation(t, start(t)) })
	}
}

func testIsolation(t *testing.T, e *env) {
	ctx := context.Background()
	a := e.tenant(t, tenantA)

	t.Run("cannot publish to the transcript stream, even its own subject", func(t *testing.T) {
		// A direct publish chooses its own Nats-Msg-Id, and deduplication
		// is stream-wide: "globex:victim-1" here would make tenant B's
		// event of that id a duplicate. Tenants publish through ingest.
		m := nats.NewMsg(e.layout.Subject(tenantA, "s1"))
		m.Header.Set(jetstream.MsgIDHeader, events.DedupID(tenantB, "victim-1"))
		m.Data = []byte("{}")
		if err := a.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		a.waitViolation(t, "publish", m.Subject)
		if n := subjectCount(t, e.admin, m.Subject); n != 0 {
			t.Fatalf("stored %d events, want 0", n)
		}
	})

	t.Run("cannot publish as another tenant", func(t *testing.T) {
		// The shard count is given: a tenant may not read stream info.
		cl, _ := client.New(a.js, tenantB, client.Shards(e.layout.Shards()))
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if _, err := cl.Publish(pctx, eventtest.NewSession("", "s1").User("x1", "hi")); err == nil {
			t.Fatal("publishing to another tenant's transcript succeeded")
		}
		a.waitViolation(t, "publish", e.layout.Subject(tenantB, "s1"))
		for _, subj := range []string{e.layout.Subject(tenantB, "s2"), "recall.transcript.globex.s2", "recall.extract.acme.s1", "recall.events.extraction_completed.acme.s1",
			"$KV.RECALL_MEMORY.acme.s1", "$JS.API.STREAM.PURGE." + e.layout.Stream(tenantA, "s1"), "$JS.API.STREAM.PURGE." + provision.StreamLegacyTranscript} {
			if err := a.nc.Publish(subj, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			a.waitViolation(t, "publish", subj)
		}
		if n := subjectCount(t, e.admin, e.layout.Subject(tenantB, "s1")); n != 0 {
			t.Fatalf("tenant B's transcript holds %d events written by A", n)
		}
	})

	t.Run("calls the API of its own sessions only", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		sub, err := e.admin.Subscribe(events.SubjectAPIRoot+".>", func(m *nats.Msg) {
			mu.Lock()
			seen = append(seen, m.Subject)
			mu.Unlock()
			_ = m.Respond([]byte(`{"ok":true}`))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		_ = e.admin.Flush()
		for _, verb := range []string{events.VerbCompact, events.VerbMemory, events.VerbExtract, events.VerbIngest} {
			if _, err := a.nc.Request(events.APISubject(verb, tenantA, "s1"), nil, 5*time.Second); err != nil {
				t.Fatalf("%s own session: %v", verb, err)
			}
			subj := events.APISubject(verb, tenantB, "s1")
			if _, err := a.nc.Request(subj, nil, 300*time.Millisecond); err == nil {
				t.Fatalf("%s of tenant B's session answered", verb)
			}
			a.waitViolation(t, "publish", subj)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if strings.Contains(s, "."+tenantB+".") {
				t.Fatalf("the service received %s from tenant A", s)
			}
		}
		if len(seen) != 4 {
			t.Fatalf("service saw %v, want the 4 own-session requests", seen)
		}
	})

	t.Run("reads its own notifications only", func(t *testing.T) {
		sub, err := a.nc.SubscribeSync(events.EventsSubject("*", tenantA, "*"))
		if err != nil {
			t.Fatal(err)
		}
		_ = a.nc.Flush()
		_ = e.admin.Publish(events.EventsSubject(events.KindExtractionCompleted, tenantB, "s1"), []byte("b"))
		_ = e.admin.Publish(events.EventsSubject(events.KindExtractionCompleted, tenantA, "s1"), []byte("a"))
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil || string(m.Data) != "a" {
			t.Fatalf("own notification: %v %v", m, err)
		}
	})

	for _, subj := range []string{
		events.EventsSubject("*", tenantB, "*"),
		events.EventsSubject(events.KindExtractionCompleted, tenantB, "s1"),
		events.SubjectEventsRoot + ".>",
		"_INBOX.>",
		natsperm.InboxPrefix(tenantB) + ".>",
		"$KV.RECALL_MEMORY.>",
		"$KV.RECALL_MEMORY." + events.MemoryKey(tenantB, "s1"),
		events.TenantTranscripts(tenantB),
		events.TenantTranscripts(tenantA), // the streams are read through the API, not the wire
		e.layout.Subject(tenantA, "s1"),
		events.APISubject(events.VerbCompact, tenantA, "s1"),
		events.APISubject(events.VerbCompact, tenantB, "*"),
		"$JS.API.>",
		">",
	} {
		t.Run("cannot subscribe to "+subj, func(t *testing.T) {
			sub, err := a.nc.SubscribeSync(subj)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if _, err := sub.NextMsg(5 * time.Second); !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("subscription to %s: %v, want a permission violation", subj, err)
			}
		})
	}

	t.Run("cannot read buckets or streams", func(t *testing.T) {
		admJS, _ := jetstream.New(e.admin)
		kv, err := admJS.KeyValue(ctx, events.BucketMemory)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, events.MemoryKey(tenantB, "s1"), []byte(`{"notes":"secret of B"}`)); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if _, err := a.js.KeyValue(short, events.BucketMemory); err == nil {
			t.Fatal("tenant opened the memory bucket")
		}
		for _, subj := range []string{
			"$JS.API.DIRECT.GET.KV_" + events.BucketMemory + ".$KV." + events.BucketMemory + "." + events.MemoryKey(tenantB, "s1"),
			"$JS.API.STREAM.MSG.GET." + e.layout.Stream(tenantA, "s1"),
			"$JS.API.DIRECT.GET." + e.layout.Stream(tenantA, "s1"),
			"$JS.API.CONSUMER.CREATE." + e.layout.Stream(tenantA, "s1"),
			"$JS.API.STREAM.INFO." + events.TranscriptShardStream(0),
		} {
			if m, err := a.nc.Request(subj, []byte(`{"seq":1}`), 300*time.Millisecond); err == nil {
				t.Fatalf("%s answered: %s", subj, m.Data)
			}
			a.waitViolation(t, "publish", subj)
		}
	})

	t.Run("another tenant's replies stay private", func(t *testing.T) {
		b := e.tenant(t, tenantB)
		sub, err := e.admin.Subscribe(events.APISubject(events.VerbMemory, tenantB, "s9"), func(m *nats.Msg) {
			_ = m.Respond([]byte("memory of B"))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		_ = e.admin.Flush()
		m, err := b.nc.Request(events.APISubject(events.VerbMemory, tenantB, "s9"), nil, 5*time.Second)
		if err != nil || string(m.Data) != "memory of B" || !strings.HasPrefix(m.Subject, natsperm.InboxPrefix(tenantB)+".") {
			t.Fatalf("B's own request: %v %v", m, err)
		}
	})

	t.Run("a client without the tenant inbox prefix gets no replies", func(t *testing.T) {
		plain := e.connect(t, "tenant-"+tenantA)
		if _, err := plain.nc.Request(events.APISubject(events.VerbMemory, tenantA, "s1"), nil, 500*time.Millisecond); err == nil {
			t.Fatal("a reply arrived through the shared inbox")
		}
	})
}

func TestServiceUsers(t *testing.T) {
	for _, name := range natsperm.Services {
		u, err := natsperm.Service(name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Permissions.Responses != nil {
			t.Errorf("%s: allow_responses lets a reply pass the deny list", name)
		}
		if !contains(u.Permissions.Publish.Allow, natsperm.TenantReplies) {
			t.Errorf("%s cannot answer in the tenants' reply spaces", name)
		}
		deny := []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>"}
		if name == "ingest" { // the eraser purges, but not the configuration
			deny = []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.KV_" + events.BucketConfig, "$JS.API.STREAM.PURGE.KV_" + events.BucketTombstones}
		}
		for _, d := range deny {
			if !contains(u.Permissions.Publish.Deny, d) {
				t.Errorf("%s may %s", name, d)
			}
		}
	}
	if _, err := natsperm.Service("nope"); !errors.Is(err, natsperm.ErrUnknownService) {
		t.Fatalf("unknown service: %v", err)
	}
	s := natstest.StartWith(t, &server.Options{Users: []*server.User{{Username: "admin", Password: adminPwd}, mustService(t, "compactor").ServerUser("pw")}})
	e := newEnv(t, s)
	c := e.connect(t, "recall-compactor", nats.UserInfo("recall-compactor", "pw"))
	// A compactor serves compaction and may send a chunked reply into the
	// tenant's reply space, without any response permission.
	sub, err := c.nc.Subscribe(events.APISubject(events.VerbCompact, "*", "*"), func(m *nats.Msg) {
		for i := 0; i < 3; i++ {
			_ = c.nc.Publish(m.Reply, []byte{byte('0' + i)})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = c.nc.Flush()
	inbox := natsperm.InboxPrefix(tenantA) + ".x1"
	rs, _ := e.admin.SubscribeSync(inbox)
	_ = e.admin.PublishRequest(events.APISubject(events.VerbCompact, tenantA, "s1"), inbox, nil)
	for i := 0; i < 3; i++ {
		if _, err := rs.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	// A reply subject in the JetStream API stays denied: nothing lets a
	// reply pass the deny list.
	shard := e.layout.Stream(tenantA, "s1")
	_ = e.admin.PublishRequest(events.APISubject(events.VerbCompact, tenantA, "s1"), "$JS.API.STREAM.PURGE."+shard, nil)
	c.waitViolation(t, "publish", "$JS.API.STREAM.PURGE."+shard)
	if err := c.nc.Publish("$JS.API.STREAM.DELETE."+shard, nil); err != nil {
		t.Fatal(err)
	}
	c.waitViolation(t, "publish", "$JS.API.STREAM.DELETE."+shard)
	if err := c.nc.Publish(e.layout.Subject(tenantA, "s1"), nil); err != nil {
		t.Fatal(err)
	}
	c.waitViolation(t, "publish", e.layout.Subject(tenantA, "s1"))
}

func mustService(t *testing.T, name string) natsperm.User {
	u, err := natsperm.Service(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestTenantRejectsBadIDs(t *testing.T) {
	for _, id := range []string{"", "a.b", "a*", ">", "a b", strings.Repeat("x", 200)} {
		if _, err := natsperm.Tenant(id, ""); err == nil {
			t.Errorf("tenant %q accepted", id)
		}
	}
	if _, err := natsperm.Tenant("ok", "bad user"); err == nil {
		t.Error("user with a space accepted")
	}
}

// TestServicesMayHeartbeat: every service may write the membership bucket
// of each consumer group it joins (a refused heartbeat leaves the replica
// retrying to join forever: the transcript's shards are never read).
func TestServicesMayHeartbeat(t *testing.T) {
	for name, buckets := range map[string][]string{
		"trigger":   {events.BucketTriggers},
		"extractor": {events.BucketWorkers},
		"indexer":   {events.BucketIndexMembers},
		"longterm":  {events.BucketLTMMembers, events.BucketLTMFollowers},
	} {
		u := mustService(t, name)
		for _, b := range buckets {
			if !contains(u.Permissions.Publish.Allow, "$KV."+b+".>") {
				t.Errorf("%s may not write its membership bucket %s", name, b)
			}
		}
	}
}

// TestGatewayMayAskItsEndpoints: the gateway's user reaches every endpoint
// the gateway calls (compact, the manual extraction a compaction's catch-up
// asks for, memory) — under recall up a refused one only shows as a NATS
// asynchronous error and a compaction that fails open.
func TestGatewayMayAskItsEndpoints(t *testing.T) {
	s := natstest.StartWith(t, &server.Options{Users: []*server.User{{Username: "admin", Password: adminPwd}, mustService(t, "gateway").ServerUser(password("recall-gateway"))}})
	e := newEnv(t, s)
	gw := e.connect(t, "recall-gateway", nats.CustomInboxPrefix(natsperm.InboxPrefix(tenantA)))
	for _, verb := range []string{events.VerbCompact, events.VerbExtract, events.VerbMemory} {
		subj := events.APISubject(verb, tenantA, "s1")
		sub, err := e.admin.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		_ = e.admin.Flush()
		if err := gw.nc.PublishRequest(subj, natsperm.InboxPrefix(tenantA)+".r1", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(3 * time.Second); err != nil {
			gw.mu.Lock()
			t.Errorf("the gateway's request on %s did not arrive: %v (errors: %v)", subj, err, gw.errs)
			gw.mu.Unlock()
		}
		_ = sub.Unsubscribe()
	}
}
