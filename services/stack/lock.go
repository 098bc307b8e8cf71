package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockFileName is the file in a data directory that the one process using
// it holds locked; it contains that process's pid.
const lockFileName = "recall.lock"

// ErrDataDirInUse is returned by Start (lockDataDir) when another process holds the
// data directory.
var ErrDataDirInUse = errors.New("data directory in use")

// LockDataDir is lockDataDir, for tools that open a stopped recall up's
// data directory with an embedded server of their own (recall backup,
// recall restore --data).
func LockDataDir(dir string) (unlock func(), err error) { return lockDataDir(dir) }

// lockDataDir takes an exclusive lock on dir (creating it) so that two
// embedded servers never share one JetStream store. The lock is released
// by unlock or when the process exits, however it exits. When another
// process holds it, the error wraps ErrDataDirInUse and names its pid.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !held {
		b, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(b))
		if _, err := strconv.Atoi(pid); err != nil {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is locked by another recall (pid %s; lock file %s): stop that one, or give this one its own --data",
			ErrDataDirInUse, dir, pid, path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}
