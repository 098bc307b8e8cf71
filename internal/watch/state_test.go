package watch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadLines: only whole lines, at least one even past maxBytes, and
// a partial last line waits.
func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10) + "\n" // longer than the read buffer
	cases := []struct {
		name, data string
		offset     int64
		max        int
		want       string
	}{
		{"empty", "", 0, 100, ""},
		{"partial only", `{"a":1`, 0, 100, ""},
		{"whole lines", "a\nb\n", 0, 100, "a\nb\n"},
		{"partial last line waits", "a\nb\n{\"c\":", 0, 100, "a\nb\n"},
		{"from an offset", "a\nb\nc\n", 2, 100, "b\nc\n"},
		{"bounded", "aa\nbb\ncc\n", 0, 4, "aa\nbb\n"},
		{"one line past the bound", "aaaaaa\nb\n", 0, 2, "aaaaaa\n"},
		{"long line", long + "tail", 0, 10, long},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readLines(strings.NewReader(c.data), c.offset, int64(len(c.data)), c.max)
			if err != nil || string(got) != c.want {
				t.Fatalf("readLines = %.40q, %v; want %.40q", got, err, c.want)
			}
		})
	}
}

// TestStateSaveLoad: a saved state loads back; a missing file is empty;
// the write leaves no temporary file.
func TestStateSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "watch.json")
	s, err := LoadState(path)
	if err != nil || len(s.Files) != 0 {
		t.Fatalf("missing file: %v, %v", s, err)
	}
	s.Files["/x/a.jsonl"] = FileState{Inode: 7, Offset: 42, Started: true}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil || got.Files["/x/a.jsonl"] != (FileState{Inode: 7, Offset: 42, Started: true}) {
		t.Fatalf("loaded %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
	os.WriteFile(path, []byte("{not json"), 0o600)
	if _, err := LoadState(path); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("corrupt state: %v", err)
	}
}

// TestStateMerge: Save keeps another process's entries and its further
// progress on the same file, but not an offset past a truncated file or of
// a replaced one.
func TestStateMerge(t *testing.T) {
	dir := t.TempDir()
	grown := filepath.Join(dir, "grown.jsonl")
	os.WriteFile(grown, bytes.Repeat([]byte("x\n"), 50), 0o600) // 100 bytes
	ino, _, _ := statFile(grown)
	path := filepath.Join(dir, "watch.json")

	other := NewState()
	other.Files[grown] = FileState{Inode: ino, Offset: 80}
	other.Files["/elsewhere.jsonl"] = FileState{Inode: 3, Offset: 9}
	other.Files["/replaced.jsonl"] = FileState{Inode: 4, Offset: 90}
	if err := other.Save(path); err != nil {
		t.Fatal(err)
	}
	mine := NewState()
	mine.Files[grown] = FileState{Inode: ino, Offset: 20}
	mine.Files["/replaced.jsonl"] = FileState{Inode: 5, Offset: 10}
	if err := mine.Save(path); err != nil {
		t.Fatal(err)
	}
	want := map[string]FileState{
		grown:              {Inode: ino, Offset: 80},
		"/elsewhere.jsonl": {Inode: 3, Offset: 9},
		"/replaced.jsonl":  {Inode: 5, Offset: 10},
	}
	for p, w := range want {
		if mine.Files[p] != w {
			t.Errorf("%s: %+v, want %+v", p, mine.Files[p], w)
		}
	}

	// The file shrank below the other process's offset: mine stays.
	os.WriteFile(grown, []byte("x\n"), 0o600)
	mine.Files[grown] = FileState{Inode: ino, Offset: 2}
	other.Files[grown] = FileState{Inode: ino, Offset: 80}
	writeAtomic(path, mustJSON(t, other))
	if err := mine.Save(path); err != nil {
		t.Fatal(err)
	}
	if mine.Files[grown].Offset != 2 {
		t.Fatalf("truncated file: offset %d, want 2", mine.Files[grown].Offset)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
