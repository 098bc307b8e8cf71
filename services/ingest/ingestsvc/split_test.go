package ingestsvc

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
)

// splitCases are batch bodies quickSplit must split exactly like the strict
// splitter, or hand to it.
var splitCases = []string{
	`[{"a":1}]`,
	` [ {"a":1} , {"b":[1,2,{"c":"]}"}]} ]  `,
	`[{"s":"quote \" and backslash \\"},{"t":"\\\\"}]`,
	`[{"u":"\u005d\u007d"},[1,2]]`,
	"[\n\t{\"a\":\"}\"}\r\n]",
	`[]`, `[1,2]`, `[{"a":1},]`, `[{"a":1}`, `[{"a":1}]x`, `[{"a":1}][{"b":2}]`, `{"a":1}`, `["x"]`,
	`[{"a":1}{"b":2}]`, `[{"a":"unterminated}]`, `[{"a":[1}]`, `[{"a":tru}]`, `[{"a":1,}]`, `[null]`, ``, `[`,
}

// quickSplit agrees with the strict splitter: on every body it splits, the
// strict one returns the same elements (or the body is invalid JSON, which
// decodeBatch then hands to the strict path).
func TestQuickSplitAgreesWithStrictSplit(t *testing.T) {
	for _, c := range splitCases {
		checkSplit(t, []byte(c))
	}
	gen := benchgen.New(5)
	for n := 1; n < 40; n += 7 {
		var batch []any
		for _, e := range gen.Interleaved([]string{"s1", "s2"}, n) {
			batch = append(batch, e)
		}
		body, err := json.MarshalIndent(batch, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		raws, ok := quickSplit(body, 1000)
		if !ok || len(raws) != n {
			t.Fatalf("a generated batch of %d events: ok %v, %d elements", n, ok, len(raws))
		}
		checkSplit(t, body)
	}
}

func checkSplit(t *testing.T, body []byte) {
	t.Helper()
	raws, ok := quickSplit(body, 1000)
	if !ok || !json.Valid(body) {
		return
	}
	strict, p := splitBatch(bytes.NewReader(body), 1000)
	if p != nil {
		t.Fatalf("%q: quickSplit split it, the strict splitter says %s", body, p.Detail)
	}
	if len(strict) != len(raws) {
		t.Fatalf("%q: %d elements, strict %d", body, len(raws), len(strict))
	}
	for i := range raws {
		if !bytes.Equal(raws[i], strict[i]) {
			t.Fatalf("%q: element %d is %q, strict %q", body, i, raws[i], strict[i])
		}
	}
}

// An invalid event inside a batch the quick splitter can delimit still
// rejects the whole batch with the strict splitter's words, and a valid
// batch with an event that is not a CloudEvent keeps its other events.
func TestDecodeBatchInvalidJSONInsideAnElement(t *testing.T) {
	l := Limits{MaxEventBytes: 1 << 20, MaxBatchEvents: 10}
	for _, body := range []string{`[{"id":"a","x":tru}]`, `[{"id":"a"},{"b":[1}]`, `[{"id":"a",}]`} {
		_, p := decodeBatch([]byte(body), l)
		if p == nil || p.Status != 400 {
			t.Fatalf("%s: want a 400 for the batch, got %+v", body, p)
		}
	}
	items, p := decodeBatch([]byte(`[{"id":"a"},{"specversion":"1.0","id":"b","source":"/s","type":"t"}]`), l)
	if p != nil || len(items) != 2 || items[0].err == nil {
		t.Fatalf("valid JSON with one bad event: problem %v, %d items", p, len(items))
	}
}

// FuzzQuickSplit: quickSplit never panics and agrees with the strict
// splitter on valid JSON.
func FuzzQuickSplit(f *testing.F) {
	for _, c := range splitCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSplit(t, body)
	})
}

// BenchmarkSplit compares the strict splitter with quickSplit (with and
// without validating the body) on a batch of 100 generated events.
func BenchmarkSplit(b *testing.B) {
	var batch []any
	for _, e := range benchgen.New(7).Interleaved([]string{"s1", "s2", "s3"}, 100) {
		batch = append(batch, e)
	}
	body, _ := json.Marshal(batch)
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, p := splitBatch(bytes.NewReader(body), 1000); p != nil {
				b.Fatal(p.Detail)
			}
		}
	})
	b.Run("quick", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, ok := quickSplit(body, 1000); !ok {
				b.Fatal("not split")
			}
		}
	})
	b.Run("quick+valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, ok := quickSplit(body, 1000); !ok || !json.Valid(body) {
				b.Fatal("not split")
			}
		}
	})
}
