package natstest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// LossyProxy is a TCP proxy in front of a NATS server that loses replies:
// the first N messages the server delivers to a client on a subject that
// starts with a prefix (a reply inbox) are dropped, everything else passes
// unchanged. A request sent through it reaches its responder and has its
// effect, but its reply never arrives — what a client sees when the node
// it is connected to dies between the two. Clients connect to URL().
type LossyProxy struct {
	l       net.Listener
	target  string
	prefix  []byte
	left    atomic.Int64 // replies still to drop
	dropped atomic.Int64
	wg      sync.WaitGroup
}

// DropReplies starts a proxy to the NATS server at addr (host:port) that
// drops the first n messages delivered on subjects starting with prefix
// (for example "_INBOX."). It is closed when the test ends.
func DropReplies(t testing.TB, addr, prefix string, n int) *LossyProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &LossyProxy{l: l, target: addr, prefix: []byte(prefix)}
	p.left.Store(int64(n))
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { l.Close(); p.wg.Wait() })
	return p
}

// URL is the proxy's client URL.
func (p *LossyProxy) URL() string { return "nats://" + p.l.Addr().String() }

// Dropped is how many messages the proxy dropped so far.
func (p *LossyProxy) Dropped() int { return int(p.dropped.Load()) }

func (p *LossyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { p.filter(c, s); c.Close() }()
	}
}

// filter copies the server's protocol stream to the client, dropping the
// MSG and HMSG frames it should lose.
func (p *LossyProxy) filter(client io.Writer, server io.Reader) {
	r := bufio.NewReaderSize(server, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		line = append([]byte(nil), line...)
		payload, ok := payloadLen(line)
		var body []byte
		if ok {
			body = make([]byte, payload+2) // payload and CRLF
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
		}
		if ok && p.lose(line) {
			continue
		}
		if _, err := client.Write(append(line, body...)); err != nil {
			return
		}
	}
}

// payloadLen returns the payload length of a MSG or HMSG control line (the
// last field).
func payloadLen(line []byte) (int, bool) {
	f := bytes.Fields(line)
	if len(f) < 4 || !(bytes.Equal(f[0], []byte("MSG")) || bytes.Equal(f[0], []byte("HMSG"))) {
		return 0, false
	}
	n, err := strconv.Atoi(string(f[len(f)-1]))
	return n, err == nil
}

// lose reports whether the frame of control line is one to drop.
func (p *LossyProxy) lose(line []byte) bool {
	f := bytes.Fields(line)
	if !bytes.HasPrefix(f[1], p.prefix) || p.left.Add(-1) < 0 {
		return false
	}
	p.dropped.Add(1)
	return true
}
