package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Session names: slugs, unique within a tenant by claiming one of a
// session's NameVariants. See docs/sessions.md, "Names".

// Slug turns a name into lowercase words of ASCII letters and digits joined
// by "-", at most IndexNameMax bytes (cut at a word). Slugs are valid KV key
// tokens.
func Slug(name string) string {
	var words []string
	var w strings.Builder
	flush := func() {
		if w.Len() > 0 {
			words = append(words, w.String())
			w.Reset()
		}
	}
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			w.WriteRune(r)
		} else {
			flush()
		}
	}
	flush()
	out := ""
	for _, word := range words {
		next := word
		if out != "" {
			next = out + "-" + word
		}
		if len(next) > IndexNameMax {
			if out == "" {
				return word[:IndexNameMax]
			}
			break
		}
		out = next
	}
	return out
}

func truncateRunes(s string, maxBytes int) string {
	for len(s) > maxBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// NameVariants returns the names session may claim for slug, in order:
// the slug itself (the first claimant keeps it readable), then the slug
// with a short and a long hex digest of the session id
// ("confirm-button-1a2b3c", then 12 hex digits). The variants are a
// function of slug and session alone, so a session asks for the same ones
// on every indexing and keeps its name; a claimant tries at most
// len(NameVariants) names however many sessions share the slug (a short
// digest collides among 5,000 colliding sessions about once; a long one,
// practically never). Every variant is a slug of at most IndexNameMax
// bytes.
func NameVariants(slug, session string) []string {
	sum := sha256.Sum256([]byte(session))
	digest := hex.EncodeToString(sum[:])
	out := []string{slug}
	for _, n := range []int{nameShortDigest, nameLongDigest} {
		stem := strings.TrimRight(truncateRunes(slug, IndexNameMax-1-n), "-")
		out = append(out, stem+"-"+digest[:n])
	}
	return out
}

// Name digest lengths, in hex digits.
const (
	nameShortDigest = 6
	nameLongDigest  = 12
)

// IsNameVariant reports whether held is a name session may hold for slug:
// one of NameVariants, or "slug-N" as names were numbered before.
func IsNameVariant(held, slug, session string) bool {
	for _, v := range NameVariants(slug, session) {
		if held == v {
			return true
		}
	}
	stem := slug // numbered names cut the slug to 60 bytes
	if len(stem) > 60 {
		stem = stem[:60]
	}
	rest, ok := strings.CutPrefix(held, stem+"-")
	if ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		return true
	}
	return false
}
