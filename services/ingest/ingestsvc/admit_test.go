package ingestsvc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// slowBody opens a connection that announces a body of size bytes for
// tenant's token and sends none of it; closing it ends the request.
func slowBody(t *testing.T, e *env, token string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", token, MediaBatch, size)
	return c
}

// TestAdmissionPerTenant: acme holds every body slot of its share (two
// large, eight small bodies that never arrive); its next bodies get 429
// with Retry-After at once, while beta's event is stored and beta's GET
// memory (the small-read lane) is answered.
func TestAdmissionPerTenant(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.BodyTimeout = 20 * time.Second })
	sub, err := e.nc.Subscribe(events.APISubject(events.VerbMemory, "beta", "s1"), func(m *nats.Msg) { _ = m.Respond([]byte(`{"notes":""}`)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil { // the responder is registered before the edge asks
		t.Fatal(err)
	}
	for range 2 {
		slowBody(t, e, tokenAcme, 8<<20)
	}
	for range 8 {
		slowBody(t, e, tokenAcme, 1000)
	}
	over := func(size int) (int, string) {
		body := make([]byte, size)
		status, hdr, _ := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaBatch}, body)
		return status, hdr.Get("Retry-After")
	}
	// The slow bodies hold acme's lanes once their requests were admitted;
	// under load that may take a while (accepting, reading headers).
	var large, small int
	var lra, sra string
	testpoll.Until(t, 30*time.Second, "acme over its share in both lanes (429)", func() bool {
		large, lra = over(2 << 20)
		small, sra = over(10)
		return large == http.StatusTooManyRequests && small == http.StatusTooManyRequests
	})
	if lra != "1" || sra != "1" {
		t.Fatalf("Retry-After %q %q, want 1", lra, sra)
	}
	status, _, body := e.post("/v1/events", tokenBeta, map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("b1", "s1")))
	if status != http.StatusAccepted {
		t.Fatalf("beta's event: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", e.base+"/v1/sessions/s1/memory", nil)
	req.Header.Set("Authorization", "Bearer "+tokenBeta)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("beta's GET memory: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestForwardedTooManyRequests: a service's 429 with Retry-After reaches
// the HTTP client as 429 with the same Retry-After.
func TestForwardedTooManyRequests(t *testing.T) {
	e := startEnv(t, nil)
	sub, err := e.nc.Subscribe(events.APISubject(events.VerbQuery, "acme", "s1"), func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{micro.ErrorCodeHeader: {"429"}, micro.ErrorHeader: {"too many requests: acme has 4 in flight"}, "Retry-After": {"7"}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil { // the responder is registered before the edge asks
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	status, hdr, body := e.post("/v1/sessions/s1/query", tokenAcme, map[string]string{"Content-Type": "application/json"}, []byte(`{"question":"x"}`))
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "7" || !strings.Contains(string(body), ProblemTooManyRequests) {
		t.Fatalf("%d Retry-After %q: %s", status, hdr.Get("Retry-After"), body)
	}
}

// TestLimitListener: at most perIP connections from one address are
// served (more are closed at once), and closing one frees its slot.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 10, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	first, second := <-accepted, <-accepted
	// The third is closed by the listener: a read ends at once.
	_ = conns[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[2].Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("third connection from one IP: read %v, want closed", err)
	}
	if n, _ := ln.open("127.0.0.1"); n != 2 {
		t.Fatalf("open %d from the IP, want 2", n)
	}
	first.Close()
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
	second.Close()
}

// TestNATSEndpointTenantShare: with a share of one request per tenant
// while acknowledgements are slow (400 ms), acme's second request is
// refused at once with 429 and Retry-After, while beta's is accepted.
func TestNATSEndpointTenantShare(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var published atomic.Int64
	sub, err := nc.Subscribe(events.AllTranscripts, func(m *nats.Msg) {
		n := published.Add(1)
		time.AfterFunc(400*time.Millisecond, func() {
			_ = m.Respond(fakeAck(m, int64(n)))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	later := microapi.NewLater(context.Background(), nc, slog.Default(), 0)
	h := NewNATSHandler(later, NewIngester(js, testLayout, 1<<20, 5*time.Second), Limits{MaxEventBytes: 1 << 20, MaxBatchEvents: 100, MaxBodyBytes: 8 << 20}, 8)
	h.tenantShare(1)
	svc, err := microapi.Serve(later, microapi.Service{Name: "ingest-share-test", Endpoints: []microapi.Endpoint{h.endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	// Requesters reply in their tenant's reply space (internal/replyspace).
	ncA, _ := s.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix("acme")))
	ncB, _ := s.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix("beta")))
	first := make(chan *nats.Msg, 1)
	go func() {
		m, _ := ncA.Request(events.APISubject(events.VerbIngest, "acme", "s1"), mustMarshal(t, structured("a1", "s1")), 5*time.Second)
		first <- m
	}()
	testpoll.Until(t, 5*time.Second, "the first request to reach the publisher", func() bool { return published.Load() > 0 })
	m, err := ncA.Request(events.APISubject(events.VerbIngest, "acme", "s1"), mustMarshal(t, structured("a2", "s1")), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "429" || m.Header.Get("Retry-After") != "1" {
		t.Fatalf("acme's second request: %v %+v", err, m)
	}
	m, err = ncB.Request(events.APISubject(events.VerbIngest, "beta", "s1"), mustMarshal(t, structured("b1", "s1")), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("beta's request: %v %+v", err, m)
	}
	if m := <-first; m == nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("acme's first request: %+v", m)
	}
	later.Stop(context.Background())
}
