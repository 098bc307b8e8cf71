package gatewaysvc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// Session is the Recall session a model request's records belong to, and
// where its id came from (Source, for logs and docs/gateway.md).
//
// The id is, in this order, the first that is set:
//
//   - the x-recall-session header (any client);
//   - Anthropic: Claude Code's X-Claude-Code-Session-Id header, else the
//     session_id in metadata.user_id (a JSON object in a string);
//   - OpenAI (Chat and Responses): the request's "conversation" (Responses:
//     a string or {"id"}), else prompt_cache_key (Codex sends its
//     conversation id there), else — Responses — the session of the
//     response previous_response_id names (remembered by this process for
//     the last sessionChainsMax responses; an unknown one, e.g. after a
//     restart, gives "gw-" and the hash of that response id, so the chain
//     goes on in one session from there), else "user" / safety_identifier
//     together with the opening below;
//   - else the opening: "gw-" and the hash of the system prompt (or
//     instructions) and the first user message, the same for every request
//     of a conversation that resends its history.
//
// A value that is not a valid Recall id (events.ValidateID: 1 to 128 of
// A-Z a-z 0-9 - _) becomes "gw-" and the first 32 hex digits of its
// SHA-256, so any client value works and maps to the same session every
// time.
type Session struct {
	ID     string
	Source string
}

// Session sources.
const (
	SourceHeader       = "x-recall-session"
	SourceClaudeCode   = "x-claude-code-session-id"
	SourceMetadata     = "metadata.user_id"
	SourceConversation = "conversation"
	SourceCacheKey     = "prompt_cache_key"
	SourcePrevious     = "previous_response_id"
	SourceUser         = "user"
	SourceOpening      = "opening"
)

// sessionID returns v as a Recall session id: v itself when valid, else its
// hash.
func sessionID(v string) string {
	if events.ValidateID(v) == nil {
		return v
	}
	return hashID(v)
}

func hashID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "gw-" + hex.EncodeToString(sum[:16])
}

// AnthropicSession is the session of an Anthropic Messages request (see
// Session).
func AnthropicSession(h http.Header, r *wire.MessagesRequest) Session {
	if s := strings.TrimSpace(h.Get(HeaderRecallSession)); s != "" {
		return Session{sessionID(s), SourceHeader}
	}
	if s := strings.TrimSpace(h.Get("X-Claude-Code-Session-Id")); s != "" {
		return Session{sessionID(s), SourceClaudeCode}
	}
	if r.Metadata != nil {
		if s := wire.SessionFromUserID(r.Metadata.UserID); s != "" {
			return Session{sessionID(s), SourceMetadata}
		}
	}
	first := ""
	for i := range r.Messages {
		if r.Messages[i].Role == events.RoleUser {
			first = wire.Text(r.Messages[i].Content)
			break
		}
	}
	return Session{hashID("anthropic", string(r.System), first), SourceOpening}
}

// ChatSession is the session of an OpenAI Chat Completions request (see
// Session).
func ChatSession(h http.Header, r *wire.ChatRequest) Session {
	if s, ok := openAIExplicit(h, r.Raw); ok {
		return s
	}
	var system, first string
	for i := range r.Messages {
		m := &r.Messages[i]
		if (m.Role == "system" || m.Role == "developer") && system == "" {
			system = wire.ContentText(m.Content)
		}
		if m.Role == events.RoleUser {
			first = wire.ContentText(m.Content)
			break
		}
	}
	return openAIOpening(r.Raw, system, first)
}

// ResponsesSession is the session of an OpenAI Responses request (see
// Session); chains remembers the sessions of earlier responses.
func ResponsesSession(h http.Header, r *wire.ResponsesRequest, chains *sessionChains) Session {
	if s, ok := openAIExplicit(h, r.Raw); ok {
		return s
	}
	if p := r.PreviousResponseID; p != "" {
		if id, ok := chains.get(p); ok {
			return Session{id, SourcePrevious}
		}
		return Session{hashID("openai.previous", p), SourcePrevious}
	}
	first := ""
	for i := range r.Items {
		if it := &r.Items[i]; it.Type == "message" && it.Role == events.RoleUser {
			first = wire.ContentText(it.Content)
			break
		}
	}
	return openAIOpening(r.Raw, r.Instructions, first)
}

// openAIExplicit reads x-recall-session, conversation and prompt_cache_key.
func openAIExplicit(h http.Header, raw map[string]json.RawMessage) (Session, bool) {
	if s := strings.TrimSpace(h.Get(HeaderRecallSession)); s != "" {
		return Session{sessionID(s), SourceHeader}, true
	}
	if c := rawString(raw["conversation"]); c != "" {
		return Session{sessionID(c), SourceConversation}, true
	}
	var conv struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw["conversation"], &conv) == nil && conv.ID != "" {
		return Session{sessionID(conv.ID), SourceConversation}, true
	}
	if k := rawString(raw["prompt_cache_key"]); k != "" {
		return Session{sessionID(k), SourceCacheKey}, true
	}
	return Session{}, false
}

func openAIOpening(raw map[string]json.RawMessage, system, first string) Session {
	user := rawString(raw["user"])
	if user == "" {
		user = rawString(raw["safety_identifier"])
	}
	if user != "" {
		return Session{hashID("openai.user", user, system, first), SourceUser}
	}
	return Session{hashID("openai", system, first), SourceOpening}
}

func rawString(b json.RawMessage) string {
	var s string
	if len(b) == 0 || json.Unmarshal(b, &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// sessionChainsMax bounds the response ids sessionChains remembers.
const sessionChainsMax = 1 << 16

// sessionChains remembers which session each recent Responses response
// belongs to, so a request continuing it with previous_response_id (and
// only its new input) joins that session. Bounded: the oldest entries are
// forgotten first. Safe for concurrent use.
type sessionChains struct {
	mu    sync.Mutex
	ids   map[string]string
	order []string // ring of keys, oldest at next
	next  int
}

func (c *sessionChains) get(response string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[response]
	return id, ok
}

func (c *sessionChains) put(response, session string) {
	if response == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = make(map[string]string)
	}
	if _, ok := c.ids[response]; ok {
		return
	}
	if len(c.order) < sessionChainsMax {
		c.order = append(c.order, response)
	} else {
		delete(c.ids, c.order[c.next])
		c.order[c.next] = response
		c.next = (c.next + 1) % sessionChainsMax
	}
	c.ids[response] = session
}
