package mcpserver_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/recallhq/recall/internal/mcpserver"
)

// TestSpeaksCurrentAndPreviousRevision: a client of the current MCP revision
// and one of the previous revision each negotiate their own revision with
// recall mcp and list its tools. The revisions are written out, not read
// from the SDK, so an SDK upgrade that drops one fails here.
func TestSpeaksCurrentAndPreviousRevision(t *testing.T) {
	c := newClient(t, "http://"+freeAddr(t), &http.Client{Timeout: 5 * time.Second})
	for _, revision := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(revision, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ct, st := mcp.NewInMemoryTransports()
			ss, err := mcpserver.New(c, "test").Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			cl := mcp.NewClient(&mcp.Implementation{Name: "revision-client", Version: "v0"}, nil)
			cs, err := cl.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: revision})
			if err != nil {
				t.Fatalf("initialize at %s: %v", revision, err)
			}
			defer func() { cs.Close(); ss.Wait() }()
			if got := cs.InitializeResult().ProtocolVersion; got != revision {
				t.Fatalf("negotiated %q, want %q", got, revision)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := make([]string, 0, len(tools.Tools))
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Contains(names, "list_sessions") {
				t.Fatalf("tools at %s: %v, want list_sessions among them", revision, names)
			}
		})
	}
}
