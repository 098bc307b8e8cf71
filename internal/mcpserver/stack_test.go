package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/services/stack"
)

// recallStack is what `recall up` runs (services/stack), in this process,
// in open mode (tenant "default", the offline LLM provider).
type recallStack struct {
	URL string // HTTP edge
}

// startRecall starts the stack until the test ends; it returns once the
// edge and every service answer (Start's contract).
func startRecall(t *testing.T) *recallStack {
	t.Helper()
	// ctx is the stack's life: it ends after Close.
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := stack.Start(ctx, stack.Options{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Log: log, Provider: llm.NewOffline()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("stopping the stack: %v", err)
		}
		cancel()
	})
	return &recallStack{URL: "http://" + st.HTTPAddr}
}

// replay stores the importer's coding-session fixture as session, as
// `recall replay` does: the importer's events through the edge's client.
func (st *recallStack) replay(t *testing.T, session string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(file), "..", "importer", "testdata", "coding-session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := importer.ClaudeCode(f, importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewHTTP(client.HTTPConfig{URL: st.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := c.PublishBatch(ctx, res.Events)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("event %d of %d: %v", i+1, len(results), r.Err)
		}
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
