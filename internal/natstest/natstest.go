// Package natstest starts real embedded nats-server instances with JetStream
// for tests. There are no mocks of NATS in Recall's tests.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded JetStream server owned by a test.
type Server struct {
	*server.Server
	Opts *server.Options
}

// Start runs a JetStream server on a random port with file storage in a
// temporary directory; it is shut down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, &server.Options{})
}

// StartWith is Start with options to override (port and store dir are filled
// in when unset).
func StartWith(t testing.TB, o *server.Options) *Server {
	t.Helper()
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = -1
	}
	o.JetStream = true
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	o.NoLog, o.NoSigs = true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return &Server{Server: s, Opts: o}
}

// Stop shuts the server down (an outage) until Restart starts it again on
// the same port and store directory.
func (s *Server) Stop() {
	if a, ok := s.Server.Addr().(*net.TCPAddr); ok {
		s.Opts.Port = a.Port
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Restart shuts the server down (unless Stop did) and starts a new one on
// the same port and store directory, as a crash and restart would. Clients
// reconnect.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	o := *s.Opts
	ns, err := server.NewServer(&o)
	if err != nil {
		t.Fatalf("natstest: restart: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: restarted server not ready")
	}
	s.Server = ns
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
}

// Connect opens a client connection closed at the end of the test.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
