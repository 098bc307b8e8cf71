package upgrade

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// Up is a `recall up` process on a data directory.
type Up struct {
	API
	NATSURL string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	out     *lockedBuffer
}

// lockedBuffer is the process's output, written by exec's copying
// goroutine while Output reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartUp runs `bin up --data dir` on free loopback ports with Env (and
// extra variables) and waits until it says it is up and its HTTP edge is
// ready; a process that
// exits first, or is not ready within 2 minutes, is an error with its
// output.
func StartUp(ctx context.Context, bin, dir string, extra ...string) (*Up, error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	httpAddr, natsAddr := addrs[0], addrs[1]
	u := &Up{API: API{Base: "http://" + httpAddr}, NATSURL: "nats://" + natsAddr, exited: make(chan struct{}), out: &lockedBuffer{}}
	u.cmd = exec.Command(bin, "up", "--data", dir, "--http", httpAddr, "--nats-listen", natsAddr, "--gateway", "")
	u.cmd.Env = append(append(os.Environ(), Env...), extra...)
	u.cmd.Stdout, u.cmd.Stderr = u.out, u.out
	if err := u.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s up: %w", bin, err)
	}
	go func() { u.err = u.cmd.Wait(); close(u.exited) }()
	if err := u.waitReady(ctx); err != nil {
		_ = u.Stop()
		return nil, err
	}
	return u, nil
}

func (u *Up) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-u.exited:
			return fmt.Errorf("recall up exited before it was ready: %v\n%s", u.err, u.Output())
		default:
		}
		// The edge is ready before every service answers; recall up prints
		// its banner once they all do.
		if resp, err := http.Get(u.Base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(u.Output(), "Recall is up.") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("recall up was not ready within 2m:\n%s", u.Output())
		}
		if !retry.Pause(ctx.Done(), 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Output is what the process printed.
func (u *Up) Output() string { return u.out.String() }

// Stop sends SIGINT (as Ctrl-C would) and waits up to a minute; an exit
// that is not clean is an error with the output.
func (u *Up) Stop() error {
	_ = u.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-u.exited:
	case <-time.After(time.Minute):
		_ = u.cmd.Process.Kill()
		<-u.exited
		return fmt.Errorf("recall up did not stop within 1m of SIGINT:\n%s", u.Output())
	}
	if u.err != nil {
		return fmt.Errorf("recall up stopped with %v:\n%s", u.err, u.Output())
	}
	return nil
}

// freeAddrs returns n distinct free loopback addresses (the listeners are
// held until all are chosen).
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// packSkip are the data directory's files a fixture leaves out: the log
// and the lock, which belong to one run.
func packSkip(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".lock")
}

// Pack writes dir as a gzipped tar to w (regular files and directories).
func Pack(w io.Writer, dir string) error {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if packSkip(rel) || !(d.IsDir() || d.Type().IsRegular()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, _ := tar.FileInfoHeader(info, "")
		h.Name, h.ModTime, h.Uname, h.Gname, h.Uid, h.Gid = filepath.ToSlash(rel), time.Unix(0, 0), "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	return errors.Join(err, tw.Close(), gz.Close())
}

// ErrBadArchive is returned by Unpack for an entry that would land
// outside the directory or is not a file or directory.
var ErrBadArchive = errors.New("bad fixture archive")

// Unpack extracts a Pack archive into dir.
func Unpack(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadArchive, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadArchive, err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%w: entry %q leaves the directory", ErrBadArchive, h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, h.FileInfo().Mode().Perm())
		default:
			err = fmt.Errorf("%w: entry %q is not a file or directory", ErrBadArchive, h.Name)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}
