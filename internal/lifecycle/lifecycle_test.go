package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLifeInOrder(t *testing.T) {
	srv := natstest.Start(t)
	s, err := lifecycle.Start(context.Background(), lifecycle.Config{Name: "test", NATS: natsconn.Config{URL: srv.ClientURL()}, OpsAddr: "127.0.0.1:0"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(t, s.OpsAddr()); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("before SetReady: %d %q", code, body)
	}
	s.SetReady(func() error { return nil })
	if code, _ := readyz(t, s.OpsAddr()); code != http.StatusOK {
		t.Fatalf("after SetReady: %d", code)
	}
	m, err := micro.AddService(s.NC, micro.Config{Name: "t", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	s.Adopt(m)
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(lifecycle.DrainTimeout + 3*time.Second):
		t.Fatal("Stop did not return in its bound")
	}
	if !m.Stopped() {
		t.Error("the adopted micro service still runs")
	}
	if !s.NC.IsClosed() {
		t.Error("the connection is not closed")
	}
	if code, _ := readyz(t, s.OpsAddr()); code != 0 {
		t.Errorf("operational endpoints still answer after Stop: %d", code)
	}
	s.Stop() // a second call does nothing
}

func TestStartFailsWhenOpsCannotListen(t *testing.T) {
	srv := natstest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = lifecycle.Start(context.Background(), lifecycle.Config{Name: "test", NATS: natsconn.Config{URL: srv.ClientURL()}, OpsAddr: ln.Addr().String()}, quiet)
	if err == nil || !strings.Contains(err.Error(), "operational endpoints") {
		t.Fatalf("want a listen error, got %v", err)
	}
}

func TestStartStoppedWhileConnecting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := lifecycle.Start(ctx, lifecycle.Config{Name: "test", NATS: natsconn.Config{URL: "nats://127.0.0.1:1"}}, quiet)
	if !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("want ErrStopped, got %v", err)
	}
}
