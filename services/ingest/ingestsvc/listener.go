package ingestsvc

import (
	"net"
	"sync"
)

// limitListener bounds the connections a listener hands out: at most
// total open at once (Accept waits for one to close, so further clients
// wait in the kernel's backlog) and at most perIP from one client address
// (more are closed at once). Closing a connection returns its slots. It
// is safe for concurrent use.
type limitListener struct {
	net.Listener
	perIP int
	slots chan struct{}

	mu   sync.Mutex
	byIP map[string]int
	done chan struct{}
	once sync.Once
}

// newLimitListener wraps ln; a bound <= 0 is no bound.
func newLimitListener(ln net.Listener, total, perIP int) *limitListener {
	l := &limitListener{Listener: ln, perIP: perIP, byIP: map[string]int{}, done: make(chan struct{})}
	if total > 0 {
		l.slots = make(chan struct{}, total)
	}
	return l
}

// Accept returns the next connection within the bounds.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.free()
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		if l.take(ip) {
			return &limitConn{Conn: c, release: func() { l.drop(ip); l.free() }}, nil
		}
		_ = c.Close()
		l.free()
	}
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open returns the connections open from ip, and the slots taken in all
// (the open connections and an Accept in progress).
func (l *limitListener) open(ip string) (fromIP, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byIP[ip], len(l.slots)
}

func (l *limitListener) free() {
	if l.slots != nil {
		<-l.slots
	}
}

func (l *limitListener) take(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP > 0 && l.byIP[ip] >= l.perIP {
		return false
	}
	l.byIP[ip]++
	return true
}

func (l *limitListener) drop(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn returns its slots once, on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
