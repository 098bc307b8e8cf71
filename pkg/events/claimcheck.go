package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
)

// BucketBlobs is the JetStream Object Store bucket that holds the bodies of
// events too large for one transcript record (the claim check). Its objects
// age out with the transcript (RECALL_TRANSCRIPT_MAX_AGE).
const BucketBlobs = "RECALL_BLOBS"

// Claim-check extension attributes. A transcript record that carries
// ExtBlob is a stub: its data is a preview of the event's data (for a
// message, the same message with every long string cut to its beginning),
// and the full data is the object ExtBlob names in BucketBlobs. Recall sets
// them; an event submitted with any of them is rejected.
const (
	// ExtBlob names the object holding the event's data (see BlobName).
	ExtBlob = "recallblob"
	// ExtBlobSize is the data's length in bytes (decimal).
	ExtBlobSize = "recallblobsize"
	// ExtBlobSHA256 is the data's SHA-256, lower-case hex.
	ExtBlobSHA256 = "recallblobsha256"
	// ExtBlobTokens is the token estimate of the full data (decimal), so a
	// reader that counts tokens need not fetch the object.
	ExtBlobTokens = "recallblobtokens"
)

// ClaimCheckExtensions lists the extensions of a claim check, for readers
// that remove them once the data is resolved.
var ClaimCheckExtensions = []string{ExtBlob, ExtBlobSize, ExtBlobSHA256, ExtBlobTokens}

// ClaimCheck says where an event's data is stored when the transcript
// record holds only a stub.
type ClaimCheck struct {
	Object string // object name in BucketBlobs
	Size   int64  // data bytes
	SHA256 string // data digest, lower-case hex
	Tokens int64  // token estimate of the data
}

// BlobName is the object name of an event's data:
// <tenant>/<session>/<event id>/<first 16 hex digits of its SHA-256>. The
// same event sent again names the same object; another body under a reused
// id names another one, so a stored stub never points at changed data.
func BlobName(tenant, session, eventID, sha256hex string) string {
	return tenant + "/" + session + "/" + eventID + "/" + sha256hex[:min(16, len(sha256hex))]
}

// BlobOwned reports whether object name belongs to the session (readers
// resolve a stub only from its own session's objects).
func BlobOwned(name, tenant, session string) bool {
	return strings.HasPrefix(name, tenant+"/"+session+"/")
}

// SetOn stamps the claim check on e as extension attributes.
func (c ClaimCheck) SetOn(e *event.Event) {
	e.SetExtension(ExtBlob, c.Object)
	e.SetExtension(ExtBlobSize, strconv.FormatInt(c.Size, 10))
	e.SetExtension(ExtBlobSHA256, c.SHA256)
	e.SetExtension(ExtBlobTokens, strconv.FormatInt(c.Tokens, 10))
}

// ClaimCheckOf reads the claim check of e. ok is false when e carries no
// ExtBlob (its data is complete); err says which attribute is malformed.
func ClaimCheckOf(e *event.Event) (c ClaimCheck, ok bool, err error) {
	ext := e.Extensions()
	v, has := ext[ExtBlob]
	if !has {
		return ClaimCheck{}, false, nil
	}
	c.Object = fmt.Sprint(v)
	c.SHA256 = strings.ToLower(fmt.Sprint(ext[ExtBlobSHA256]))
	if c.Object == "" || len(c.SHA256) != 64 {
		return c, true, &FieldError{Field: ExtBlob, Reason: "claim check without an object name or a SHA-256"}
	}
	if c.Size, err = strconv.ParseInt(fmt.Sprint(ext[ExtBlobSize]), 10, 64); err != nil || c.Size < 0 {
		return c, true, &FieldError{Field: ExtBlobSize, Reason: "not a byte count"}
	}
	if t, has := ext[ExtBlobTokens]; has {
		c.Tokens, _ = strconv.ParseInt(fmt.Sprint(t), 10, 64)
	}
	return c, true, nil
}

// HasClaimCheckAttribute reports the first claim-check extension e carries,
// if any (ingest rejects such events: only Recall sets them).
func HasClaimCheckAttribute(e *event.Event) (string, bool) {
	for _, name := range ClaimCheckExtensions {
		if _, ok := e.Extensions()[name]; ok {
			return name, true
		}
	}
	return "", false
}

// Preview limits: each long string of a stub keeps its first PreviewChars
// bytes; blocks after the first PreviewBlocks keep only what counts them
// (type, tool ids and names).
const (
	PreviewChars  = 1024
	PreviewBlocks = 16
)

// PreviewMessage returns m as a stub carries it: every field but the
// content as is, and each content block with its long strings cut to their
// beginning (PreviewChars, on a UTF-8 boundary), tool inputs and media
// sources over PreviewChars replaced by {} and null. Block types and
// counts are kept, so a reader of the stub sees the message's shape.
func PreviewMessage(m *Message) *Message {
	p := *m
	p.Content = previewContent(m.Content, 0)
	return &p
}

func previewContent(c Content, depth int) Content {
	if c == nil {
		return nil
	}
	out := make(Content, len(c))
	for i, b := range c {
		keep := PreviewChars
		if i >= PreviewBlocks || depth > 0 && i >= 4 {
			keep = 0
		}
		b.Text, b.Thinking, b.Data = cut(b.Text, keep), cut(b.Thinking, keep), cut(b.Data, keep)
		if len(b.Signature) > PreviewChars {
			b.Signature = ""
		}
		if len(b.Input) > PreviewChars {
			b.Input = json.RawMessage(`{}`)
		}
		if len(b.Source) > PreviewChars {
			b.Source = nil
		}
		if depth < 2 {
			b.Content = previewContent(b.Content, depth+1)
		} else {
			b.Content = nil
		}
		out[i] = b
	}
	return out
}

// cut returns the beginning of s, at most n bytes, ending on a rune
// boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
