package mcpserver

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// MemoryURITemplate names a session's notes as a resource.
const MemoryURITemplate = "recall://sessions/{session}/memory"

// listedSessions is how many sessions resources/list names (the newest).
const listedSessions = 100

// MemoryURI is the resource URI of session's notes.
func MemoryURI(session string) string {
	return "recall://sessions/" + url.PathEscape(session) + "/memory"
}

// addResources registers the notes template and lists the newest sessions'
// notes as resources (a middleware on resources/list: the set changes with
// the index, so it is read on each list rather than registered).
func addResources(s *mcp.Server, c *client.HTTP) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "session-memory", Title: "Session memory notes",
		URITemplate: MemoryURITemplate, MIMEType: "text/markdown",
		Description: "The markdown memory notes Recall keeps for a session (session: its id)."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return readMemory(callContext(ctx, req), c, req.Params.URI)
		})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListResourcesResult)
			if err != nil || method != "resources/list" || !ok || lr.NextCursor != "" {
				return res, err
			}
			lr.Resources = append(lr.Resources, sessionResources(callContext(ctx, req), c)...)
			return lr, nil
		}
	})
}

// sessionResources lists the newest sessions as memory resources; when the
// index cannot be read it lists none (the template still serves reads).
func sessionResources(ctx context.Context, c *client.HTTP) []*mcp.Resource {
	rep, err := c.Sessions(ctx, events.SessionsRequest{Limit: listedSessions})
	if err != nil {
		return nil
	}
	out := make([]*mcp.Resource, 0, len(rep.Sessions))
	for _, s := range rep.Sessions {
		name := s.Session
		if s.Name != "" {
			name = s.Name
		}
		out = append(out, &mcp.Resource{URI: MemoryURI(s.Session), Name: name, MIMEType: "text/markdown",
			Title: "Memory of " + name, Description: s.Description})
	}
	return out
}

// readMemory serves recall://sessions/{session}/memory; a session without
// notes is "resource not found".
func readMemory(ctx context.Context, c *client.HTTP, uri string) (*mcp.ReadResourceResult, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "recall" || u.Host != "sessions" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	session, ok := strings.CutSuffix(strings.TrimPrefix(u.Path, "/"), "/memory")
	if !ok || session == "" || strings.Contains(session, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	rep, err := c.Memory(ctx, session)
	if client.Status(err) == http.StatusNotFound {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: rep.Record.Notes}}}, nil
}
