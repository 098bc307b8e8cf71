// Package embedded runs a nats-server with JetStream inside the recall
// process, for `recall up`, `recall demo` and `recall bench`.
package embedded

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures the embedded server.
type Options struct {
	// DataDir is the JetStream file store directory.
	DataDir string
	// Listen is the client address (host:port); empty picks a free loopback
	// port.
	Listen string
	// MaxPayload overrides the server's maximum message size (default 1 MiB).
	MaxPayload int32
	// Users, when set, are the only clients the server accepts (user and
	// password, with their permissions); nil serves without authentication.
	Users []*server.User
}

// Start starts the server and waits until it accepts connections. The caller
// shuts it down with Shutdown and WaitForShutdown.
func Start(o Options) (*server.Server, error) {
	so := &server.Options{
		ServerName: "recall-embedded",
		JetStream:  true,
		StoreDir:   o.DataDir,
		Host:       "127.0.0.1",
		Port:       -1,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: o.MaxPayload,
		Users:      o.Users,
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen address %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("nats listen port %q: %w", port, err)
		}
		so.Host, so.Port = host, p
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start listening on %s:%d (is the port in use? set --nats-listen)", so.Host, so.Port)
	}
	return s, nil
}
