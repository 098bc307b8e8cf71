package stack

import (
	"fmt"
	"net"
)

// freeAddr checks that addr (host:port) can be listened on now and returns
// it with port 0 replaced by a free port the system picked, so that what
// the caller prints is where it will listen. what names the listener and
// flag the way to choose another address, for the error. Another process
// may take the port between the check and the real listen; the check is to
// fail at once with a clear error in the common case (a second recall up),
// not a guarantee.
func freeAddr(addr, what, flag string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s address %q: %w", what, addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("the %s cannot listen on %s (is another recall up running?): %w; choose another address with %s", what, addr, err, flag)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return net.JoinHostPort(host, port), nil
}
