package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/testpoll"
)

// ClusterName is the cluster name every test cluster uses.
const ClusterName = "recall-test"

// Cluster is a JetStream cluster of embedded servers on loopback, the one
// cluster kit of Recall's tests. Node i is named "n<i>" and has its own file
// store, client port and route port, all fixed for the test: Stop and Start
// stop a node and start it again with its store, on the same ports, as a
// crashed and restarted machine would. Every node is shut down when the
// test ends.
//
// The methods are safe for concurrent use (a test may stop a node in one
// goroutine while services start in another); Fatal failures must happen
// on the test's goroutine, so call Start, StartCluster and WaitMetaLeader
// from there.
type Cluster struct {
	t     testing.TB
	opts  []*server.Options
	mu    sync.Mutex
	nodes []*server.Server // nil while stopped
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartCluster starts n JetStream servers routed to each other and waits
// (up to 30 s) until JetStream has a meta leader that knows every peer.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: make([]*server.Options, n), nodes: make([]*server.Server, n)}
	routePorts := make([]int, n)
	var routes []*url.URL
	for i := range routePorts {
		routePorts[i] = FreePort(t)
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", routePorts[i])})
	}
	for i := range n {
		c.opts[i] = &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       FreePort(t),
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster:    server.ClusterOpts{Name: ClusterName, Host: "127.0.0.1", Port: routePorts[i]},
			Routes:     routes,
			NoLog:      true,
			NoSigs:     true,
		}
	}
	t.Cleanup(func() {
		for i := range c.opts {
			c.Stop(i)
		}
	})
	for i := range n {
		c.Start(i)
	}
	c.WaitMetaLeader(30 * time.Second)
	return c
}

// Len is the number of nodes, running or stopped.
func (c *Cluster) Len() int { return len(c.opts) }

// Name is node i's server name ("n<i>").
func (c *Cluster) Name(i int) string { return c.opts[i].ServerName }

// Index is the index of the node named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, o := range c.opts {
		if o.ServerName == name {
			return i
		}
	}
	return -1
}

// Node is node i's server, or nil while it is stopped.
func (c *Cluster) Node(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Running lists the running nodes' servers.
func (c *Cluster) Running() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server.Server
	for _, s := range c.nodes {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Start starts node i (again) with its store directory and ports and waits
// until it accepts connections; a running node is left alone. Call it from
// the test's goroutine.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	if c.Node(i) != nil {
		return
	}
	o := *c.opts[i]
	s, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatalf("natstest: cluster node %s: %v", c.Name(i), err)
	}
	s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		c.t.Fatalf("natstest: cluster node %s not ready", c.Name(i))
	}
	c.mu.Lock()
	c.nodes[i] = s
	c.mu.Unlock()
}

// Stop shuts node i down and waits until it is down; a stopped node is left
// alone. Its store is kept for Start.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Restart stops node i and starts it again with its store.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	c.Start(i)
}

// URL is node i's client URL.
func (c *Cluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port) }

// URLs lists every node's client URL, comma separated (a client fails over
// between them), whether the node is running or not.
func (c *Cluster) URLs() string {
	u := make([]string, len(c.opts))
	for i := range c.opts {
		u[i] = c.URL(i)
	}
	return strings.Join(u, ",")
}

// Connect opens a client connection to the whole cluster (reconnecting
// forever, retrying a failed first connect), closed when the test ends.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond), nats.RetryOnFailedConnect(true)}, opts...)
	nc, err := nats.Connect(c.URLs(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect to cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// WaitMetaLeader waits up to d until a running node is the JetStream meta
// leader and knows every node as a peer; it fails the test otherwise. Call
// it from the test's goroutine.
func (c *Cluster) WaitMetaLeader(d time.Duration) {
	c.t.Helper()
	testpoll.Until(c.t, d, "a JetStream meta leader that knows every peer", func() bool {
		for _, s := range c.Running() {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.opts) {
				return true
			}
		}
		return false
	})
}

// MetaLeader is the index of the running node that is the JetStream meta
// leader, or -1 while there is none.
func (c *Cluster) MetaLeader() int {
	for i := range c.opts {
		if s := c.Node(i); s != nil && s.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StreamState is node i's local view of a stream in the global account
// (its replica's state); ok is false while the node is stopped or does not
// hold the stream.
func (c *Cluster) StreamState(i int, stream string) (state server.StreamState, ok bool) {
	s := c.Node(i)
	if s == nil {
		return server.StreamState{}, false
	}
	jsz, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return server.StreamState{}, false
	}
	for _, a := range jsz.AccountDetails {
		for _, sd := range a.Streams {
			if sd.Name == stream {
				return sd.State, true
			}
		}
	}
	return server.StreamState{}, false
}

// StreamCurrent reports whether node i's replica of stream (global
// account) is running and current with its leader.
func (c *Cluster) StreamCurrent(i int, stream string) bool {
	s := c.Node(i)
	return s != nil && s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}
