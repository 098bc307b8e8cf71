// Package mcpserver is Recall's MCP server (`recall mcp`): the calls an
// agent would make itself — compact now, clear old tool results, read or
// refresh its session memory, list and ask past sessions, resolve @@
// references, read its user's long-term memory — as MCP tools, and each
// session's notes as a resource (recall://sessions/{session}/memory).
//
// It is a client of Recall's HTTP API (docs/api.md, through pkg/client's
// HTTP client) and holds no state of
// its own: the tenant is whatever its token authenticates, every tool call
// is one or two HTTP calls, and an error of Recall (a problem document)
// becomes a tool result with IsError set and the problem's detail as its
// text, never a protocol error. It does not retry: a 429 or 503 is reported
// with its Retry-After for the agent to decide.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/client"
)

// Config configures Run. Run reads no environment; cmd/recall fills it
// from flags and RECALL_URL / RECALL_TOKEN.
type Config struct {
	// RecallURL is the base URL of Recall's HTTP edge.
	RecallURL string
	// Token is the bearer token sent to Recall (empty: none, open mode).
	// Over streamable HTTP a request's own Authorization header wins.
	Token string
	// HTTPAddr, when set, serves streamable HTTP on this address at
	// /mcp instead of stdio.
	HTTPAddr string
	// CallTimeout bounds one call of Recall (0: 5 minutes; a compaction's
	// LLM fallback or a question can take a while).
	CallTimeout time.Duration
	// Version is reported to clients as the server's version.
	Version string
}

// Path is where the streamable HTTP transport is served.
const Path = "/mcp"

// New returns an MCP server whose tools and resources call Recall through
// c. The server may be run on any number of transports at once.
func New(c *client.HTTP, version string) *mcp.Server {
	if version == "" {
		version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "recall", Title: "Recall session memory", Version: version},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	addTool(s, c, compactTool)
	addTool(s, c, editTool)
	addTool(s, c, memoryTool)
	addTool(s, c, extractTool)
	addTool(s, c, listTool)
	addTool(s, c, askTool)
	addTool(s, c, resolveTool)
	addTool(s, c, userMemoryTool)
	addResources(s, c)
	return s
}

// addTool adds the tool that mk makes for c.
func addTool[In, Out any](s *mcp.Server, c *client.HTTP, mk func(*client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[In, Out])) {
	t, h := mk(c)
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			// The text goes to the agent: no secret in it (issue 43, F4).
			err = errors.New(telemetry.Redact(err.Error()))
		}
		return res, out, err
	})
}

const instructions = "Recall keeps background memory of agent sessions. Use get_session_memory for a session's " +
	"notes, compact_session to compact a long context from them, edit_context to learn which old tool results to " +
	"clear, list_sessions / ask_session / resolve_references to draw on past sessions, and get_user_memory for what " +
	"is known about the user."

// Run serves the MCP server over stdio (cfg.HTTPAddr empty) until the
// client disconnects or ctx ends, or over streamable HTTP until ctx ends;
// log receives diagnostics (never stdout, which is the stdio transport).
// A clean stop returns nil.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.RecallURL == "" {
		return errors.New("mcpserver: no Recall URL")
	}
	timeout := cfg.CallTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	c, err := client.NewHTTP(client.HTTPConfig{URL: cfg.RecallURL, Token: cfg.Token, HTTP: &http.Client{Timeout: timeout}, Attempts: 1})
	if err != nil {
		return fmt.Errorf("mcpserver: %w", err)
	}
	srv := New(c, cfg.Version)
	log.Info("recall mcp", "recall_url", c.URL(), "token_set", cfg.Token != "", "http", cfg.HTTPAddr)
	if cfg.HTTPAddr == "" {
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return serveHTTP(ctx, cfg.HTTPAddr, srv, log)
}

// serveHTTP serves srv over streamable HTTP on addr at Path until ctx
// ends, then shuts the listener down, giving requests 5 s to finish.
func serveHTTP(ctx context.Context, addr string, srv *mcp.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		log.Warn("the MCP endpoint is reachable from other hosts: a request without its own Authorization acts with this server's token")
	}
	mux := http.NewServeMux()
	mux.Handle(Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log, SessionTimeout: 30 * time.Minute}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+Path)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting the MCP endpoint down: %w", err)
	}
	return nil
}
