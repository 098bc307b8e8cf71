package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileState is how far one transcript file has been ingested.
type FileState struct {
	// Inode identifies the file; a different inode at the same path is a
	// replaced file, read again from 0.
	Inode uint64 `json:"inode"`
	// Offset is the byte offset just past the last line whose events were
	// all settled (accepted, or rejected for good). It only ever ends a
	// whole line.
	Offset int64 `json:"offset"`
	// Started is true once the file's dev.recall.session.started event was
	// settled: later reads leave it out, so it is stored once even after
	// the dedup window.
	Started bool `json:"started,omitempty"`
}

// State maps transcript paths (as the watcher names them) to their
// progress. It is not safe for concurrent use; a State is owned by one
// goroutine, and processes share it through its file (Load, Save).
type State struct {
	Files map[string]FileState `json:"files"`
}

// NewState returns an empty State.
func NewState() *State { return &State{Files: map[string]FileState{}} }

// LoadState reads the state file at path; a missing file is an empty State.
func LoadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading watch state: %w", err)
	}
	s := NewState()
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("decoding watch state %s (remove it to read every transcript again; dedup keeps that safe): %w", path, err)
	}
	if s.Files == nil {
		s.Files = map[string]FileState{}
	}
	return s, nil
}

// Save writes s to path atomically (a temporary file in the same directory,
// synced, then renamed over path), creating the directory. Another process
// (recall hook beside recall watch) may have saved progress of its own
// since: under an advisory lock, Save first merges what is on disk — an
// entry s lacks is kept, and an entry of the same file that is further on
// disk and still within the file wins — and s takes the merged entries, so
// neither process sends again what the other settled.
func (s *State) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("saving watch state: %w", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return fmt.Errorf("saving watch state: %w", err)
	}
	defer unlock()
	if disk, err := LoadState(path); err == nil {
		s.merge(disk, statFile)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding watch state: %w", err)
	}
	return writeAtomic(path, append(b, '\n'))
}

// merge takes from disk the entries s lacks, and those of the same file
// (same inode) that are further on and not past the file's current size.
func (s *State) merge(disk *State, stat func(string) (inode uint64, size int64, err error)) {
	for p, d := range disk.Files {
		mine, ok := s.Files[p]
		if !ok {
			s.Files[p] = d
			continue
		}
		if d.Inode != mine.Inode || d.Offset <= mine.Offset {
			continue
		}
		if ino, size, err := stat(p); err == nil && ino == d.Inode && size >= d.Offset {
			s.Files[p] = d
		}
	}
}

// writeAtomic writes b to a temporary file beside path, syncs it and
// renames it over path.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("saving watch state: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving watch state: %w", err)
	}
	return nil
}
