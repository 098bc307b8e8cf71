package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Compaction blocks (Anthropic) and items (OpenAI Responses) the gateway
// answers are marked as Recall's in their opaque field, encrypted_content:
// MarkerPrefix, then the base64url JSON of a Marker, a dot, and the
// base64url HMAC-SHA256 of that JSON under the gateway's key. A block
// whose marker does not verify, or names another tenant or session, is not
// trusted: it still never reaches an upstream as a compaction block (it is
// converted to plain text like any of Recall's), but nothing it claims is
// used.
const MarkerPrefix = "recall.v1."

// Block and item types.
const (
	TypeCompaction      = "compaction"
	TypeCompactionDelta = "compaction_delta"
)

// Marker is what a Recall compaction block says about itself.
type Marker struct {
	Tenant  string `json:"t"`
	Session string `json:"s"`
	// LastSummarizedID is the compactor's lastSummarizedId when the block
	// was made (informational).
	LastSummarizedID string `json:"l,omitempty"`
	// Kept is how many of the messages (items) before the block the
	// summary does not cover: the kept window, which later requests keep.
	// Head is the fingerprint (Fingerprint) of the first of them.
	Kept int    `json:"k,omitempty"`
	Head string `json:"h,omitempty"`
	// SummaryLen is the length in bytes of the summary at the start of
	// the block's text (the rest renders the kept window).
	SummaryLen int `json:"n,omitempty"`
	// Summary is the block's text, for items whose content is opaque
	// (OpenAI); Anthropic blocks carry it in their content.
	Summary string `json:"m,omitempty"`
}

// ErrMarker wraps every reason a marker is not trusted.
var ErrMarker = errors.New("not a valid Recall compaction marker")

// Seal encodes m as the opaque value of a compaction block, signed with key.
func Seal(key []byte, m Marker) string {
	payload, _ := json.Marshal(m)
	return MarkerPrefix + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac(key, payload))
}

// IsMarker reports whether an opaque value claims to be Recall's (true for
// forged ones too: Open decides whether it is trusted).
func IsMarker(s string) bool { return strings.HasPrefix(s, MarkerPrefix) }

// Open decodes and verifies a marker made by Seal with key. The marker
// must name tenant (a block made for one tenant is never trusted by
// another) and, when session is not empty, session.
func Open(key []byte, s, tenant, session string) (Marker, error) {
	body, ok := strings.CutPrefix(s, MarkerPrefix)
	p64, s64, ok2 := strings.Cut(body, ".")
	if !ok || !ok2 {
		return Marker{}, fmt.Errorf("%w: malformed", ErrMarker)
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil {
		return Marker{}, fmt.Errorf("%w: malformed", ErrMarker)
	}
	if !hmac.Equal(sig, mac(key, payload)) {
		return Marker{}, fmt.Errorf("%w: the signature does not verify", ErrMarker)
	}
	var m Marker
	if err := json.Unmarshal(payload, &m); err != nil {
		return Marker{}, fmt.Errorf("%w: %v", ErrMarker, err)
	}
	if m.Tenant != tenant {
		return Marker{}, fmt.Errorf("%w: made for another tenant", ErrMarker)
	}
	if session != "" && m.Session != session {
		return Marker{}, fmt.Errorf("%w: made for another session", ErrMarker)
	}
	return m, nil
}

func mac(key, payload []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(payload)
	return h.Sum(nil)
}

// Fingerprint identifies a message (or item) by its content, insensitive to
// how a client re-serializes it (a string or text blocks, cache_control
// moved): the SHA-256 of its role and the text, ids and inputs of its
// blocks, 16 hex digits.
func Fingerprint(role string, parts []string) string {
	h := sha256.New()
	h.Write([]byte(role))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// CompactionBlock is an Anthropic compaction block in the wire shape the
// SDKs parse: {"type":"compaction","content":summary,"encrypted_content":marker}.
type CompactionBlock struct {
	Type             string  `json:"type"`
	Content          *string `json:"content"`
	EncryptedContent *string `json:"encrypted_content"`
}

// NewCompactionBlock is a Recall compaction block.
func NewCompactionBlock(summary, marker string) CompactionBlock {
	return CompactionBlock{Type: TypeCompaction, Content: &summary, EncryptedContent: &marker}
}

// rawBlock is a content block as sent, with the fields compaction reads.
type rawBlock struct {
	Type             string          `json:"type"`
	Content          json.RawMessage `json:"content"`
	EncryptedContent string          `json:"encrypted_content"`
}

// FoundBlock is the last compaction block of a request: in message Msg at
// block Block, its summary text and opaque value.
type FoundBlock struct {
	Msg, Block int
	Summary    string
	Opaque     string
}

// Recall reports whether the block is marked as Recall's.
func (f FoundBlock) Recall() bool { return IsMarker(f.Opaque) }

// LastCompaction finds the last compaction block of msgs (ok false when
// there is none). It reads the messages as sent (Raw), since the decoded
// content does not keep a compaction block's opaque field.
func LastCompaction(msgs []Msg) (FoundBlock, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		raw := msgs[i].Raw
		if msgs[i].Role != "assistant" || !bytes.Contains(raw, []byte(`"compaction"`)) {
			continue
		}
		var m struct {
			Content []rawBlock `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		for j := len(m.Content) - 1; j >= 0; j-- {
			if b := m.Content[j]; b.Type == TypeCompaction {
				var text string
				_ = json.Unmarshal(b.Content, &text)
				return FoundBlock{Msg: i, Block: j, Summary: text, Opaque: b.EncryptedContent}, true
			}
		}
	}
	return FoundBlock{}, false
}

// CompactionItem is an OpenAI Responses compaction item.
type CompactionItem struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	EncryptedContent string `json:"encrypted_content"`
}
