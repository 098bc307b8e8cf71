package natsperm_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/pkg/events"
)

// TestIngestUserErases: the ingest user has what the eraser needs (a
// session and a user erased, the guard started) and may not purge the
// configuration.
func TestIngestUserErases(t *testing.T) {
	s := natstest.StartWith(t, &server.Options{Users: []*server.User{{Username: "admin", Password: adminPwd}, mustService(t, "ingest").ServerUser("pw")}})
	e := newEnv(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, adminJS := s.Connect(t, nats.UserInfo("admin", adminPwd))
	if _, err := adminJS.Publish(ctx, e.layout.Subject("acme", "s1"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	c := e.connect(t, "recall-ingest", nats.UserInfo("recall-ingest", "pw"))
	er := erase.New(c.js, e.layout, erase.Config{Drain: time.Millisecond}, nil, nil)
	if err := er.Guard(ctx); err != nil {
		t.Fatalf("guard: %v", err)
	}
	r, err := er.Session(ctx, "acme", "s1", erase.Actor{})
	if err != nil || r.Count(e.layout.Stream("acme", "s1"), "") != 1 {
		t.Fatalf("session erase: %+v, %v", r, err)
	}
	if _, err := er.User(ctx, "acme", "u1", true, erase.Actor{}); err != nil {
		t.Fatalf("user erase: %v", err)
	}
	cfg, err := c.js.Stream(ctx, "KV_"+events.BucketConfig)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	if err := cfg.Purge(pctx, jetstream.WithPurgeSubject("$KV."+events.BucketConfig+".tenant.acme")); err == nil {
		t.Error("the ingest user purged the configuration")
	}
}
