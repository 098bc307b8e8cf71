package ingestsvc

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// TestShutdownDrainsInFlight holds one HTTP and one NATS request between
// publishing and awaiting acknowledgement, shuts the service down, and
// checks both are answered 202 and stored, and that shutdown returns nil
// only after that.
func TestShutdownDrainsInFlight(t *testing.T) {
	e := startEnv(t, nil)
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	hook := func() { entered <- struct{}{}; <-release }
	e.svc.in.afterSubmit.Store(&hook)

	httpDone := make(chan int, 1)
	go func() {
		status, _, _ := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("g1", "s1")))
		httpDone <- status
	}()
	<-entered
	natsDone := make(chan *nats.Msg, 1)
	go func() {
		m, err := e.nc.Request(events.APISubject(events.VerbIngest, "acme", "s1"), mustMarshal(t, structured("g2", "s1")), 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		natsDone <- m
	}()
	<-entered

	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownDone <- e.svc.Shutdown(ctx)
	}()
	testpoll.Until(t, 10*time.Second, "shutdown to start", func() bool { return e.svc.life.Ready() != nil })
	select {
	case err := <-shutdownDone:
		t.Fatalf("shutdown returned %v with requests in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if status := <-httpDone; status != http.StatusAccepted {
		t.Fatalf("in-flight HTTP request: %d", status)
	}
	m := <-natsDone
	if m == nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("in-flight NATS request: %v", m)
	}
	var r Response
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Accepted != 1 {
		t.Fatalf("NATS reply %s", m.Data)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := len(e.stored()); n != 2 {
		t.Fatalf("%d stored, want 2", n)
	}
	if !e.svc.nc.IsClosed() || !e.svc.apiNC.IsClosed() {
		t.Fatal("connections not closed after shutdown")
	}
	if _, err := http.Get(e.base + "/healthz"); err == nil {
		t.Fatal("HTTP edge still accepts connections after shutdown")
	}
}

func TestSessionAPIProxy(t *testing.T) {
	e := startEnv(t, nil)
	svc, err := micro.AddService(e.nc, micro.Config{Name: "fake-memory", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	var gotSubject, gotBody string
	err = svc.AddEndpoint("memory", micro.HandlerFunc(func(r micro.Request) {
		gotSubject = r.Subject()
		_ = r.RespondJSON(events.MemoryReply{Key: "acme.s1", Revision: 7})
	}), micro.WithEndpointSubject("recall.api.memory.*.*"))
	if err != nil {
		t.Fatal(err)
	}
	err = svc.AddEndpoint("extract", micro.HandlerFunc(func(r micro.Request) {
		gotBody = string(r.Data())
		_ = r.Error("409", "an extraction of this session is running", nil)
	}), micro.WithEndpointSubject("recall.api.extract.*.*"))
	if err != nil {
		t.Fatal(err)
	}
	e.nc.Flush()

	req, _ := http.NewRequest(http.MethodGet, e.base+"/v1/sessions/s1/memory", nil)
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var mr events.MemoryReply
	_ = json.NewDecoder(resp.Body).Decode(&mr)
	resp.Body.Close()
	if resp.StatusCode != 200 || mr.Revision != 7 || gotSubject != "recall.api.memory.acme.s1" {
		t.Fatalf("memory: %d %+v on %q", resp.StatusCode, mr, gotSubject)
	}

	status, hdr, body := e.post("/v1/sessions/s1/extract", tokenAcme, map[string]string{"Content-Type": "application/json"}, []byte(`{"timeout_ms":5}`))
	var p events.Problem
	_ = json.Unmarshal(body, &p)
	if status != http.StatusConflict || hdr.Get("Content-Type") != MediaProblem || p.Detail != "an extraction of this session is running" || gotBody != `{"timeout_ms":5}` {
		t.Fatalf("extract: %d %s (request body %q)", status, body, gotBody)
	}

	status, _, body = e.post("/v1/sessions/s1/compact", tokenAcme, nil, nil)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("compact without a responder: %d %s", status, body)
	}
	status, _, _ = e.post("/v1/sessions/s1/compact", "", nil, nil)
	if status != http.StatusUnauthorized {
		t.Fatalf("compact without token: %d", status)
	}
	status, _, _ = e.post("/v1/sessions/bad.session/compact", tokenAcme, nil, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("bad session id: %d", status)
	}
}

// TestStopWhileStartingIsClean: a stop while ingest is still connecting is
// a clean stop, as in the other services (Run used to return the
// connection error, so a SIGTERM during start-up exited 1).
func TestStopWhileStartingIsClean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := Config{NATS: natsconn.Config{URL: "nats://127.0.0.1:1"}, HTTPAddr: "127.0.0.1:0"}
	if err := Run(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("Run stopped while starting: %v, want nil (a clean stop)", err)
	}
	if _, err := Start(ctx, cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start stopped while starting: %v, want lifecycle.ErrStopped", err)
	}
}
