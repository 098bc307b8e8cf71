package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSubset(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
		at        string
	}{
		{`{"a":1,"b":{"c":[1,2]}}`, `{"a":1,"b":{"c":[1,2],"d":3},"e":4}`, true, ""},
		{`{"a":1}`, `{"a":2}`, false, "$.a"},
		{`{"a":{"b":"x"}}`, `{"a":{}}`, false, "$.a.b"},
		{`{"a":[1,2]}`, `{"a":[1]}`, false, "$.a"},
		{`{"a":[{"b":1}]}`, `{"a":[{"b":1,"c":2}]}`, true, ""},
		{`{"a":[{"b":1}]}`, `{"a":[{"b":2}]}`, false, "$.a[0].b"},
		{`{"a":null}`, `{}`, true, ""},
		{`{"a":1}`, `not json`, false, "$"},
	} {
		at, ok := SubsetJSON(json.RawMessage(c.want), json.RawMessage(c.got))
		if ok != c.ok || at != c.at {
			t.Errorf("SubsetJSON(%s, %s) = %q, %v; want %q, %v", c.want, c.got, at, ok, c.at, c.ok)
		}
	}
}

func TestPackUnpack(t *testing.T) {
	src := t.TempDir()
	for name, body := range map[string]string{"expect.json": "{}", "data/jetstream/a/1.blk": "block", "data/recall.log": "log", "data/recall.lock": ""} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := Pack(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(bytes.NewReader(buf.Bytes()), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "data", "jetstream", "a", "1.blk")); err != nil || string(b) != "block" {
		t.Errorf("block: %q %v", b, err)
	}
	for _, skipped := range []string{"data/recall.log", "data/recall.lock"} {
		if _, err := os.Stat(filepath.Join(dst, filepath.FromSlash(skipped))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was archived (%v)", skipped, err)
		}
	}
	if err := Unpack(bytes.NewReader([]byte("not gzip")), dst); !errors.Is(err, ErrBadArchive) {
		t.Errorf("Unpack of garbage: %v, want ErrBadArchive", err)
	}
}
