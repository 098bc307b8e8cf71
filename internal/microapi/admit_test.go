package microapi_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// TestAdmissionPerKeyAndGlobal: with two slots per tenant and three in all,
// a tenant holding its two is refused 429 with Retry-After while another
// tenant is admitted; once the service is full a third tenant gets 503;
// released slots admit again.
func TestAdmissionPerKeyAndGlobal(t *testing.T) {
	a := microapi.NewAdmission(2, 3, 2*time.Second)
	relA1, e1 := a.Admit("acme")
	relA2, e2 := a.Admit("acme")
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	if _, aerr := a.Admit("acme"); aerr == nil || aerr.Code != 429 || aerr.RetryAfter != 2*time.Second || !strings.Contains(aerr.Msg, "share is 2") {
		t.Fatalf("acme over its share: %+v", aerr)
	}
	relB, aerr := a.Admit("globex")
	if aerr != nil {
		t.Fatalf("globex refused while acme is over its share: %v", aerr)
	}
	if _, aerr := a.Admit("initech"); aerr == nil || aerr.Code != 503 {
		t.Fatalf("full service: %+v", aerr)
	}
	relA1()
	relA1() // a second release is a no-op
	if n, total := a.InFlight("acme"); n != 1 || total != 2 {
		t.Fatalf("in flight after a release: acme %d, total %d", n, total)
	}
	if rel, aerr := a.Admit("acme"); aerr != nil {
		t.Fatalf("acme after a release: %v", aerr)
	} else {
		rel()
	}
	relA2()
	relB()
	if _, total := a.InFlight(""); total != 0 {
		t.Fatalf("%d left in flight", total)
	}
}

// TestLaterGoRefusesOverShare serves an endpoint through Later.Go with one
// slot per tenant: while acme's first request works, its second is
// answered 429 with a Retry-After header at once, globex's is served, and
// acme's first is answered when its work ends.
func TestLaterGoRefusesOverShare(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	later, adm := microapi.NewLater(context.Background(), nc, slog.Default(), 0), microapi.NewAdmission(1, 10, time.Second)
	svc, err := micro.AddService(nc, micro.Config{Name: "admit-test", Version: "1.0.0", StatsHandler: later.Stats})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	release := make(chan struct{})
	err = svc.AddEndpoint("work", micro.HandlerFunc(func(req micro.Request) {
		tenant := string(req.Data())
		later.Go(req, "work", adm, tenant, func(ctx context.Context) (any, *microapi.Error) {
			if tenant == "acme" {
				<-release
			}
			return map[string]string{"tenant": tenant}, nil
		})
	}), micro.WithEndpointSubject("admit.work"))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		m, err := nc.Request("admit.work", []byte("acme"), 10*time.Second)
		if err == nil && m.Header.Get(micro.ErrorCodeHeader) != "" {
			err = micro.ErrRespond
		}
		first <- err
	}()
	testpoll.Until(t, 5*time.Second, "acme's first request to be admitted", func() bool {
		n, _ := adm.InFlight("acme")
		return n > 0
	})
	m, err := nc.Request("admit.work", []byte("acme"), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "429" || m.Header.Get("Retry-After") != "1" {
		t.Fatalf("acme's second: %v %v", err, m.Header)
	}
	m, err = nc.Request("admit.work", []byte("globex"), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("globex: %v %v", err, m)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("acme's first: %v", err)
	}
	later.Stop(context.Background())
	if st := later.Snapshot("work"); st.NumRequests != 2 || st.InFlight != 0 {
		t.Fatalf("answered later: %+v", st)
	}
}
