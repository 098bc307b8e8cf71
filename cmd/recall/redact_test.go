package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// planted is the password every command of TestNoCommandPrintsAURLPassword
// is given in its URLs.
const planted = "Pl4nted-Passw0rd"

// captureStderr runs fn with os.Stderr (and os.Stdin, when stdin is not
// empty) redirected, and returns what fn wrote there.
func captureStderr(t *testing.T, stdin string, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	oldErr, oldIn := os.Stderr, os.Stdin
	os.Stderr = f
	if stdin != "" {
		in := filepath.Join(t.TempDir(), "stdin")
		os.WriteFile(in, []byte(stdin), 0o600)
		if os.Stdin, err = os.Open(in); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { os.Stderr, os.Stdin = oldErr, oldIn }()
	fn()
	b, _ := os.ReadFile(f.Name())
	return string(b)
}

// TestNoCommandPrintsAURLPassword (issue 43, F4): recall watch, hook,
// replay, migrate and mcp (its log and its tools' error texts), given URLs
// with a password of Recall (RECALL_URL) or NATS that cannot be reached,
// print the password nowhere: not on stdout, not on stderr, not in the
// error they return, not to the agent.
func TestNoCommandPrintsAURLPassword(t *testing.T) {
	down := "127.0.0.1:1"
	recallURL := "http://ada:" + planted + "@" + down
	dir := t.TempDir()
	transcript := filepath.Join(dir, "p", "s.jsonl")
	os.MkdirAll(filepath.Dir(transcript), 0o755)
	data, _ := os.ReadFile(demoFixture)
	os.WriteFile(transcript, data, 0o600)
	hookIn := fmt.Sprintf(`{"session_id":"s","hook_event_name":"Stop","transcript_path":%q}`, transcript)
	state := filepath.Join(t.TempDir(), "w.json")
	for _, tc := range []struct {
		name, stdin string
		args        []string
	}{
		{"watch", "", []string{"watch", dir, "--recall-url", recallURL, "--state", state}},
		{"hook", hookIn, []string{"hook", "-v", "--recall-url", recallURL, "--state", state, "--transcripts", dir}},
		{"replay", "", []string{"replay", "--recall-url", recallURL, "--retry-for", "1s", "--attempt-timeout", "300ms", demoFixture}},
		{"replay-nats", "", []string{"replay", "--nats-url", "nats://ada:" + planted + "@" + down, demoFixture}},
		{"migrate", "", []string{"migrate", "--nats-url", "nats://ada:" + planted + "@" + down}},
		{"mcp", "", []string{"mcp", "-v", "--recall-url", recallURL, "--http", unusedAddr(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var stdout bytes.Buffer
			var err error
			var toolText string
			stderr := captureStderr(t, tc.stdin, func() {
				if tc.name == "mcp" {
					done := make(chan error, 1)
					go func() { done <- run(ctx, tc.args, &stdout) }()
					toolText = mcpToolError(t, tc.args[len(tc.args)-1])
					cancel()
					err = <-done
					return
				}
				err = run(ctx, tc.args, &stdout)
			})
			all := stdout.String() + "\n" + stderr + "\n" + fmt.Sprint(err) + "\n" + toolText
			if strings.Contains(all, planted) {
				t.Fatalf("the password is in the output:\n%s", all)
			}
			if !strings.Contains(all, "127.0.0.1:1") && tc.name != "watch" && tc.name != "mcp" {
				t.Fatalf("the output does not say where it looked (the test would prove nothing):\n%s", all)
			}
		})
	}
}

// mcpToolError connects to recall mcp's streamable HTTP endpoint at addr
// and returns the text of a tool call that fails (Recall is down).
func mcpToolError(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}
	var cs *mcp.ClientSession
	var err error
	for ctx.Err() == nil {
		if cs, err = mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, tr, nil); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("connecting to recall mcp: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_sessions", Arguments: map[string]any{}})
	if err != nil || !res.IsError || len(res.Content) == 0 {
		t.Fatalf("list_sessions with Recall down: %+v %v", res, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "127.0.0.1:1") {
		t.Fatalf("the tool error does not say where it looked: %q", text)
	}
	return text
}

// unusedAddr is a local address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
