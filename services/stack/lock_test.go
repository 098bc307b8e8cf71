package stack

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A data directory is held by one process: a second lock fails at once,
// naming the holder's pid, and the directory is free again after unlock.
func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock()
}

// freeAddr resolves port 0 to a free port and refuses a port in use with
// the flag that chooses another.
func TestFreeAddr(t *testing.T) {
	addr, err := freeAddr("127.0.0.1:0", "HTTP edge", "--http")
	if err != nil || strings.HasSuffix(addr, ":0") || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("port 0: %q, %v", addr, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = freeAddr(ln.Addr().String(), "HTTP edge", "--http")
	if err == nil || !strings.Contains(err.Error(), "cannot listen on "+ln.Addr().String()) || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("port in use: %v", err)
	}
}
