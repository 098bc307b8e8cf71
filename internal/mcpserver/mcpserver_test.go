package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/recallhq/recall/internal/mcpserver"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/client"
)

// connect runs the MCP server for client c in process and returns a
// connected MCP client session (the SDK's in-memory transport).
func connect(t *testing.T, c *client.HTTP) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(c, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// call calls tool with args, fails the test on a protocol error or a tool
// error, and decodes the structured output into out.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res := callRaw(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tool, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decoding %s: %v", tool, b, err)
	}
}

func callRaw(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var allTools = []string{"ask_session", "compact_session", "edit_context", "extract_session", "get_session_memory",
	"get_user_memory", "list_sessions", "resolve_references"}

// TestToolsAgainstRecall lists the tools, calls every one against a real
// `recall up` holding one replayed session, and reads the session's notes
// as a resource.
func TestToolsAgainstRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts recall up")
	}
	st := startRecall(t)
	st.replay(t, "demo1")
	cs := connect(t, newClient(t, st.URL, nil))

	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, input or output schema missing", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, allTools) {
		t.Fatalf("tools %v, want %v", names, allTools)
	}

	t.Run("session", func(t *testing.T) { testSessionTools(t, cs) })
	t.Run("index", func(t *testing.T) { testIndexTools(t, cs) })
	t.Run("resources", func(t *testing.T) { testResources(t, cs) })
	t.Run("errors", func(t *testing.T) { testToolErrors(t, cs) })
	t.Run("streamable-http", func(t *testing.T) { testStreamableHTTP(t, st.URL) })
}

// testStreamableHTTP runs `recall mcp --http` (Run) and calls a tool and
// reads a resource over streamable HTTP.
func testStreamableHTTP(t *testing.T, recallURL string) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(ctx, mcpserver.Config{RecallURL: recallURL, HTTPAddr: addr}, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + mcpserver.Path}
	var cs *mcp.ClientSession
	testpoll.Until(t, 10*time.Second, "the MCP endpoint", func() bool {
		var err error
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "test-http", Version: "v0"}, nil).Connect(ctx, tr, nil)
		return err == nil
	})
	defer cs.Close()
	var ls mcpserver.ListOutput
	call(t, cs, "list_sessions", nil, &ls)
	if len(ls.Sessions) != 1 {
		t.Fatalf("list_sessions over HTTP: %+v", ls)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.MemoryURI("demo1")})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text == "" {
		t.Fatalf("read over HTTP: %+v, %v", rr, err)
	}
}

func testSessionTools(t *testing.T, cs *mcp.ClientSession) {
	var ex mcpserver.ExtractOutput
	call(t, cs, "extract_session", map[string]any{"session": "demo1"}, &ex)
	if !ex.Success || ex.UpToSeq == 0 || ex.Revision == 0 {
		t.Fatalf("extract_session: %+v", ex)
	}
	var mem mcpserver.MemoryOutput
	call(t, cs, "get_session_memory", map[string]any{"session": "demo1"}, &mem)
	if mem.Notes == "" || mem.Revision != ex.Revision || mem.CoveredSeq < ex.UpToSeq {
		t.Fatalf("get_session_memory: %+v, after %+v", mem, ex)
	}
	var cp mcpserver.CompactOutput
	call(t, cs, "compact_session", map[string]any{"session": "demo1"}, &cp)
	if !cp.Served || cp.Summary == "" || cp.TokensBefore == 0 || cp.TokensAfter == 0 {
		t.Fatalf("compact_session: %+v", cp)
	}
	var pv mcpserver.CompactOutput
	call(t, cs, "compact_session", map[string]any{"session": "demo1", "preview": true, "context_tokens": 180000}, &pv)
	if pv.Outcome == "" {
		t.Fatalf("compact_session preview: %+v", pv)
	}
	var ed mcpserver.EditOutput
	call(t, cs, "edit_context", map[string]any{"session": "demo1", "trigger_tokens": 1, "keep_tool_uses": 2}, &ed)
	if len(ed.Clear) == 0 || ed.TokensAfter >= ed.TokensBefore {
		t.Fatalf("edit_context cleared nothing: %+v", ed)
	}
	for _, b := range ed.Clear {
		if b.UUID == "" || b.Seq == 0 || b.Kind == "" || b.Action == "" {
			t.Fatalf("edit_context: incomplete block %+v", b)
		}
	}
}

func testIndexTools(t *testing.T, cs *mcp.ClientSession) {
	var ls mcpserver.ListOutput
	testpoll.Until(t, 60*time.Second, "demo1 in the session index", func() bool {
		call(t, cs, "list_sessions", map[string]any{"limit": 10}, &ls)
		return len(ls.Sessions) == 1 && ls.Sessions[0].Session == "demo1" && ls.Sessions[0].Indexed
	})
	var ask mcpserver.AskOutput
	call(t, cs, "ask_session", map[string]any{"session": "demo1", "question": "Which flag was added to tally sum?"}, &ask)
	if ask.Session != "demo1" || ask.Answer == "" {
		t.Fatalf("ask_session: %+v", ask)
	}
	var rs mcpserver.ResolveOutput
	call(t, cs, "resolve_references", map[string]any{"text": "As in @@" + ls.Sessions[0].Name + ": which flag was added?", "answer": true}, &rs)
	if len(rs.Resolved) != 1 || rs.Resolved[0].Session.Session != "demo1" || rs.Resolved[0].Answer == nil || rs.Context == "" {
		t.Fatalf("resolve_references: %+v", rs)
	}
	var um mcpserver.UserMemoryOutput
	call(t, cs, "get_user_memory", map[string]any{"user": "u-7"}, &um)
	if um.User != "u-7" || um.Documents == nil {
		t.Fatalf("get_user_memory: %+v", um)
	}
}

func testResources(t *testing.T, cs *mcp.ClientSession) {
	ctx := context.Background()
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != mcpserver.MemoryURITemplate {
		t.Fatalf("resource templates: %+v", tpl.ResourceTemplates)
	}
	lr, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := mcpserver.MemoryURI("demo1")
	if !slices.ContainsFunc(lr.Resources, func(r *mcp.Resource) bool { return r.URI == uri }) {
		t.Fatalf("resources/list lacks %s: %+v", uri, lr.Resources)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].MIMEType != "text/markdown" || rr.Contents[0].Text == "" {
		t.Fatalf("read %s: %+v", uri, rr.Contents)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.MemoryURI("no-such-session")}); err == nil {
		t.Fatal("reading the notes of an unknown session succeeded")
	}
}

// testToolErrors: Recall's refusals are tool results with IsError and the
// problem's detail, not protocol errors.
func testToolErrors(t *testing.T, cs *mcp.ClientSession) {
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_session_memory", map[string]any{"session": "no-such-session"}, "404"},
		{"compact_session", map[string]any{"session": "bad.id"}, "400"},
		{"resolve_references", map[string]any{"ref": "no-such-session-anywhere"}, "404"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res := callRaw(t, cs, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("IsError %v, text %q; want an error with %q", res.IsError, text(res), tc.want)
			}
		})
	}
}

// TestUnreachableRecall: a Recall that does not answer is a tool error that
// says where the server looked.
func TestUnreachableRecall(t *testing.T) {
	cs := connect(t, newClient(t, "http://"+freeAddr(t), &http.Client{Timeout: 5 * time.Second}))
	res := callRaw(t, cs, "list_sessions", nil)
	if !res.IsError || !strings.Contains(text(res), "is it running?") {
		t.Fatalf("IsError %v, text %q", res.IsError, text(res))
	}
}

// TestStreamableHTTPForwardsToken: over streamable HTTP a client's own
// bearer token reaches Recall instead of the server's.
func TestStreamableHTTPForwardsToken(t *testing.T) {
	seen := make(chan string, 16)
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sessions":[]}`))
	}))
	defer edge.Close()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(ctx, mcpserver.Config{RecallURL: edge.URL, Token: "server-token", HTTPAddr: addr}, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	hc := &http.Client{Transport: bearer{"client-token"}}
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + mcpserver.Path, HTTPClient: hc}
	var cs *mcp.ClientSession
	testpoll.Until(t, 10*time.Second, "the MCP endpoint", func() bool {
		var err error
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "test-token", Version: "v0"}, nil).Connect(ctx, tr, nil)
		return err == nil
	})
	defer cs.Close()
	var ls mcpserver.ListOutput
	call(t, cs, "list_sessions", nil, &ls)
	if got := <-seen; got != "Bearer client-token" {
		t.Fatalf("Recall got Authorization %q, want the client's token", got)
	}
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// newClient is the HTTP client recall mcp makes: no retries.
func newClient(t *testing.T, url string, hc *http.Client) *client.HTTP {
	t.Helper()
	c, err := client.NewHTTP(client.HTTPConfig{URL: url, HTTP: hc, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
