package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/services/stack"
)

// recall compact on recall up's stack: a session without records is an
// error that says so; a short session's small reduction is explained, and
// --min-tokens shows the keep window's effect.
func TestCompactCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := stack.Start(ctx, stack.Options{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Log: log, Provider: llm.NewOffline()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Setenv("RECALL_URL", "http://"+st.HTTPAddr)
	t.Setenv("RECALL_NATS_URL", st.NATSURL)
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, &out)
		return out.String(), err
	}
	_, err = cli("compact", "--session", "nosuch")
	var nr *noRecordsError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "session nosuch has no records") {
		t.Fatalf("compact of a session without records: %v", err)
	}
	for _, args := range [][]string{{"replay", demoFixture, "--session", "demo1"}, {"extract", "--session", "demo1"}} {
		if out, err := cli(args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	out, err := cli("compact", "--session", "demo1")
	if err != nil || !strings.Contains(out, "why so little:  the keep window keeps the latest messages verbatim — at least 10,000 tokens and 5 text messages") {
		t.Fatalf("compact: %v\n%s", err, out)
	}
	out, err = cli("compact", "--session", "demo1", "--min-tokens", "2000", "--json")
	if err != nil || !strings.Contains(out, `"served": true`) {
		t.Fatalf("compact --min-tokens: %v\n%s", err, out)
	}
	out, err = cli("compact", "--session", "demo1", "--min-tokens", "2000")
	if err != nil || strings.Contains(out, "why so little") {
		t.Fatalf("compact --min-tokens 2000 still explains a small reduction: %v\n%s", err, out)
	}
}
