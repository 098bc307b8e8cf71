package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

func runMemory(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "get" && args[0] != "history") {
		return fmt.Errorf("%w: recall memory get|history --session S [--tenant T] [--json] (see 'recall memory -h')", errUsage)
	}
	sub := args[0]
	fs := newFlags("memory " + sub)
	setUsage(fs, "memory get|history --session S [flags]\n\n  get      the session's memory: the notes and what they cover\n  history  every kept revision, with a diff from the one before")
	target := addSessionFlags(fs, "session id (required)", "tenant")
	session, tenant, natsURL := target.session, target.tenant, target.natsURL
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := target.validate(true); err != nil {
		return err
	}
	kv, closeNATS, err := openBucket(ctx, *natsURL, "recall-memory", events.BucketMemory)
	if err != nil {
		return err
	}
	defer closeNATS()
	key := events.MemoryKey(*tenant, *session)
	if sub == "get" {
		return memoryGet(ctx, kv, key, stdout, *asJSON)
	}
	return memoryHistory(ctx, kv, key, stdout, *asJSON)
}

func memoryGet(ctx context.Context, kv jetstream.KeyValue, key string, stdout io.Writer, asJSON bool) error {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return fmt.Errorf("%s has no memory yet", key)
	}
	if err != nil {
		return fmt.Errorf("reading memory: %w", err)
	}
	rec, err := store.DecodeMemory(key, e.Revision(), e.Value())
	if err != nil {
		return err
	}
	reply := events.MemoryReply{Key: key, Revision: e.Revision(), Record: rec}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reply)
	}
	printMemoryHeader(stdout, key, e.Revision(), e.Created(), reply.Record)
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, reply.Record.Notes)
	if !strings.HasSuffix(reply.Record.Notes, "\n") {
		fmt.Fprintln(stdout)
	}
	return nil
}

func printMemoryHeader(w io.Writer, key string, rev uint64, at time.Time, r events.MemoryRecord) {
	fmt.Fprintf(w, "# %s revision %d (%s)\n", key, rev, at.Local().Format(time.DateTime))
	fmt.Fprintf(w, "# covered seq %d, last summarized seq %d (%s), %d extraction(s) by %s/%s\n",
		r.CoveredSeq, r.LastSummarizedSeq, orDash(r.LastSummarizedID), r.Extractions, orDash(r.Provider), orDash(r.Model))
	fmt.Fprintf(w, "# tokens: input %d, output %d, cache read %d, cache creation %d\n",
		r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheCreationTokens)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// historyEntry is one revision in `recall memory history --json`.
type historyEntry struct {
	Revision uint64               `json:"revision"`
	Time     time.Time            `json:"time"`
	Deleted  bool                 `json:"deleted,omitempty"`
	Record   *events.MemoryRecord `json:"record,omitempty"`
	Diff     string               `json:"diff,omitempty"`
}

func memoryHistory(ctx context.Context, kv jetstream.KeyValue, key string, stdout io.Writer, asJSON bool) error {
	hist, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s has no memory yet", key)
	}
	if err != nil {
		return fmt.Errorf("reading memory history: %w", err)
	}
	var out []historyEntry
	prev := ""
	for _, e := range hist {
		h := historyEntry{Revision: e.Revision(), Time: e.Created()}
		if e.Operation() != jetstream.KeyValuePut {
			h.Deleted = true
			out = append(out, h)
			prev = ""
			continue
		}
		r, err := store.DecodeMemory(key, e.Revision(), e.Value())
		if err != nil {
			return err
		}
		h.Record = &r
		h.Diff = unifiedDiff(prev, r.Notes, fmt.Sprintf("%s@%d", key, prevRev(out)), fmt.Sprintf("%s@%d", key, e.Revision()), 3)
		prev = r.Notes
		out = append(out, h)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "%d revision(s) of %s kept (RECALL_MEMORY_HISTORY bounds it)\n", len(out), key)
	for _, h := range out {
		fmt.Fprintln(stdout)
		if h.Deleted {
			fmt.Fprintf(stdout, "# %s revision %d (%s): deleted\n", key, h.Revision, h.Time.Local().Format(time.DateTime))
			continue
		}
		printMemoryHeader(stdout, key, h.Revision, h.Time, *h.Record)
		if h.Diff == "" {
			fmt.Fprintln(stdout, "(notes unchanged)")
		} else {
			fmt.Fprint(stdout, h.Diff)
		}
	}
	return nil
}

func prevRev(out []historyEntry) uint64 {
	if len(out) == 0 {
		return 0
	}
	return out[len(out)-1].Revision
}

// unifiedDiff returns the unified diff (context lines around each change)
// from a to b, or "" when they are equal. It is a longest-common-subsequence
// line diff: fine for memory documents (a few hundred lines); above
// maxDiffCells it falls back to replacing everything.
func unifiedDiff(a, b, nameA, nameB string, context int) string {
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	ops := diffLines(al, bl)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	// Line positions in a and b before each op.
	ia, ib := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for k, op := range ops {
		ia[k+1], ib[k+1] = ia[k], ib[k]
		if op != '+' {
			ia[k+1]++
		}
		if op != '-' {
			ib[k+1]++
		}
	}
	// Hunks: every change with `context` ops around it, merged when close.
	var hunks [][2]int
	for k, op := range ops {
		if op == '=' {
			continue
		}
		lo, hi := max(k-context, 0), min(k+context+1, len(ops))
		if n := len(hunks); n > 0 && lo <= hunks[n-1][1] {
			hunks[n-1][1] = max(hunks[n-1][1], hi)
		} else {
			hunks = append(hunks, [2]int{lo, hi})
		}
	}
	for _, h := range hunks {
		lo, hi := h[0], h[1]
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(ia[lo], ia[hi]-ia[lo]), hunkRange(ib[lo], ib[hi]-ib[lo]))
		for k := lo; k < hi; k++ {
			switch ops[k] {
			case '=':
				sb.WriteString(" " + al[ia[k]] + "\n")
			case '-':
				sb.WriteString("-" + al[ia[k]] + "\n")
			case '+':
				sb.WriteString("+" + bl[ib[k]] + "\n")
			}
		}
	}
	return sb.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

const maxDiffCells = 16 << 20

// diffLines returns the edit script from a to b as a sequence of '=', '-'
// and '+' (deletions before insertions within a change).
func diffLines(a, b []string) []byte {
	// Trim the common prefix and suffix first: most revisions touch a few
	// lines.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var mid []byte
	if (len(ma)+1)*(len(mb)+1) > maxDiffCells {
		mid = append(mid, []byte(strings.Repeat("-", len(ma))+strings.Repeat("+", len(mb)))...)
	} else {
		// lcs[i][j] = LCS length of ma[i:] and mb[j:].
		n, m := len(ma), len(mb)
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				mid = append(mid, '=')
				i, j = i+1, j+1
			case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
				mid = append(mid, '+')
				j++
			default:
				mid = append(mid, '-')
				i++
			}
		}
	}
	ops := make([]byte, 0, pre+len(mid)+suf)
	ops = append(ops, []byte(strings.Repeat("=", pre))...)
	ops = append(ops, mid...)
	ops = append(ops, []byte(strings.Repeat("=", suf))...)
	return ops
}
