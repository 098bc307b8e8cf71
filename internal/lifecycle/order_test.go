package lifecycle_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
)

// steps records the order of the stop.
type steps struct {
	mu  sync.Mutex
	got []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	s.got = append(s.got, step)
	s.mu.Unlock()
}

// finisher is a Finisher that records when it runs and what it sees.
type finisher struct {
	steps *steps
	svc   micro.Service
	life  *lifecycle.Service
}

func (f finisher) Stop(context.Context) {
	if !f.svc.Stopped() {
		f.steps.add("await before the micro service stopped")
	}
	if f.life.NC.IsClosed() {
		f.steps.add("await after the drain")
	}
	f.steps.add("await")
}

// TestStopOrder: the HTTP edge finishes its request in flight first, then
// the micro services stop, the finishers run, the component's steps run,
// and the connections drain — the extra ones and the service's own.
func TestStopOrder(t *testing.T) {
	srv := natstest.Start(t)
	s, err := lifecycle.Start(context.Background(), lifecycle.Config{Name: "test", NATS: natsconn.Config{URL: srv.ClientURL()}}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	var st steps
	entered, release := make(chan struct{}), make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		st.add("http request answered")
	})
	errc := s.ServeHTTP(&http.Server{Handler: h, ReadHeaderTimeout: time.Second}, ln, 5*time.Second)
	extra, err := s.Connect("test-extra")
	if err != nil {
		t.Fatal(err)
	}
	m, err := micro.AddService(s.NC, micro.Config{Name: "t", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	s.Adopt(m)
	s.Await(finisher{&st, m, s})
	s.OnStop(func() { st.add("on stop") })
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the request in flight: %d", code)
	}
	want := []string{"http request answered", "await", "on stop"}
	if len(st.got) != len(want) {
		t.Fatalf("steps %q, want %q", st.got, want)
	}
	for i := range want {
		if st.got[i] != want[i] {
			t.Fatalf("steps %q, want %q", st.got, want)
		}
	}
	if !extra.IsClosed() || !s.NC.IsClosed() {
		t.Fatal("a connection is still open after Shutdown")
	}
	select {
	case err := <-errc:
		t.Fatalf("the HTTP edge reported %v", err)
	default:
	}
}
