package telemetry

import (
	"context"
	"encoding"
	"encoding/json"
	"log/slog"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Masked replaces a secret in log output.
const Masked = "[REDACTED]"

// secretWords are key words that name a secret wherever they stand in an
// attribute key ("nats_password", "X-Api-Token", "authorization").
var secretWords = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "passphrase": true,
	"secret": true, "token": true, "authorization": true, "auth": true,
	"creds": true, "credential": true, "credentials": true,
	"apikey": true, "cookie": true, "seed": true, "nkey": true,
	"bearer": true, "signature": true,
}

// keyQualifiers make a following "key" a secret ("api_key", "private-key");
// a bare "key" (a KV key, a map key) is not one.
var keyQualifiers = map[string]bool{
	"api": true, "private": true, "secret": true, "access": true, "signing": true,
	"encryption": true, "master": true, "client": true,
}

// countWords after a secret word turn the key into a measurement, not a
// secret: "token_count", "token_budget".
var countWords = map[string]bool{
	"count": true, "counts": true, "budget": true, "limit": true, "estimate": true,
	"usage": true, "max": true, "min": true, "threshold": true, "ttl": true, "expiry": true,
	"expires": true, "file": true, "path": true, "type": true, "mode": true, "method": true,
	"scheme": true, "enabled": true, "required": true, "provider": true, "url": true,
}

// IsSecretKey reports whether an attribute or field name looks like it holds
// a secret: its words (split at '_', '-', '.', spaces and camelCase) contain
// password, secret, token, authorization, creds, seed, cookie… or "key"
// qualified by api, private, access, secret…; unless the secret word is
// followed by a measurement word (token_count, token_budget, creds_file).
// Plural "tokens" is a count and not a secret.
func IsSecretKey(key string) bool {
	words := splitWords(key)
	for i, w := range words {
		secret := secretWords[w] || (w == "key" && i > 0 && keyQualifiers[words[i-1]])
		if !secret {
			continue
		}
		if i+1 < len(words) && countWords[words[i+1]] {
			continue
		}
		return true
	}
	return false
}

// pluralSecretWords name collections of secrets ("tokens" of tenants) when
// the value is not a number; as numbers they are counts ("input_tokens").
var pluralSecretWords = map[string]bool{
	"tokens": true, "passwords": true, "secrets": true, "apikeys": true, "cookies": true, "seeds": true,
}

func isPluralSecretKey(key string) bool {
	for _, w := range splitWords(key) {
		if pluralSecretWords[w] {
			return true
		}
	}
	return false
}

func isNumber(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindDuration, slog.KindBool:
		return true
	}
	return false
}

func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ' || r == '/':
			flush()
		case unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}

// Value patterns of known secret formats.
var (
	// Authorization schemes followed by a credential.
	authSchemeRE = regexp.MustCompile(`\b(Bearer|bearer|BEARER|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}`)
	// Anthropic (sk-ant-…) and OpenAI-style (sk-…, sk-proj-…) API keys.
	apiKeyRE = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`)
	// NATS nkey seeds (SU…, SA…, SO…) and JWTs (NATS user JWTs, OAuth tokens).
	nkeySeedRE = regexp.MustCompile(`\bS[UAON][A-Z2-7]{40,}\b`)
	jwtRE      = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+`)
	// Passwords in URLs: scheme://user:password@host.
	urlPasswordRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@`)
	// Secrets in query strings and key=value text: ?api_key=…, token: "…".
	paramRE = regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_-])*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|auth|authorization|creds|signature)(?:[_-][a-z0-9]+)*)(["']?\s*[=:]\s*["']?)([^\s&"',;}]+)`)
)

// Redact returns s with every secret-looking substring replaced by Masked:
// API keys of the sk-ant-… and sk-… forms, credentials after "Bearer",
// "Basic" and "Token", NATS nkey seeds, JWTs, passwords in URLs
// (scheme://user:pass@host) and values of secret-named parameters
// (password=…, api_key=…, "token": "…"). Text without such substrings is
// returned unchanged.
func Redact(s string) string {
	if s == "" {
		return s
	}
	s = authSchemeRE.ReplaceAllString(s, "${1}${2}"+Masked)
	s = apiKeyRE.ReplaceAllString(s, Masked)
	s = nkeySeedRE.ReplaceAllString(s, Masked)
	s = jwtRE.ReplaceAllString(s, Masked)
	s = urlPasswordRE.ReplaceAllString(s, "${1}:"+Masked+"@")
	s = paramRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := paramRE.FindStringSubmatch(m)
		if !IsSecretKey(sub[1]) {
			return m
		}
		if sub[3] == Masked || strings.HasPrefix(sub[3], "[") || isAuthScheme(sub[3]) {
			return m
		}
		return sub[1] + sub[2] + Masked
	})
	return s
}

func isAuthScheme(s string) bool {
	switch s {
	case "Bearer", "bearer", "BEARER", "Basic":
		return true
	}
	return false
}

// NewRedactHandler wraps h so that no secret reaches it: attributes whose key
// IsSecretKey, or whose key names secrets in the plural ("tokens") and whose
// value is not a number, are replaced by Masked (empty values stay empty, so
// a logged configuration still shows what is unset), string values, error texts and
// the message pass through Redact, and structs, pointers to structs and
// string-keyed maps are logged as groups of their exported fields with the
// same rules applied at every level (json tags name the fields; LogValuer
// implementations are honoured). Values that marshal themselves (time.Time,
// json.Marshaler, encoding.TextMarshaler) are logged as they are.
func NewRedactHandler(h slog.Handler) slog.Handler { return redactHandler{h} }

type redactHandler struct{ h slog.Handler }

func (r redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a, 0))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a, 0)
	}
	return redactHandler{r.h.WithAttrs(red)}
}

func (r redactHandler) WithGroup(name string) slog.Handler { return redactHandler{r.h.WithGroup(name)} }

// maxDepth bounds the walk into nested values (and cycles through pointers).
const maxDepth = 8

func redactAttr(a slog.Attr, depth int) slog.Attr {
	v := a.Value.Resolve()
	if a.Key != "" && !isEmptyValue(v) && (IsSecretKey(a.Key) || (isPluralSecretKey(a.Key) && !isNumber(v))) {
		return slog.String(a.Key, Masked)
	}
	return slog.Attr{Key: a.Key, Value: redactValue(v, depth)}
}

func isEmptyValue(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString:
		return v.String() == ""
	case slog.KindAny:
		a := v.Any()
		if a == nil {
			return true
		}
		rv := reflect.ValueOf(a)
		return rv.IsZero()
	case slog.KindGroup:
		return len(v.Group()) == 0
	}
	return false
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func redactValue(v slog.Value, depth int) slog.Value {
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(Redact(v.String()))
	case slog.KindGroup:
		as := v.Group()
		out := make([]slog.Attr, len(as))
		for i, a := range as {
			out[i] = redactAttr(a, depth+1)
		}
		return slog.GroupValue(out...)
	case slog.KindAny:
	default:
		return v
	}
	a := v.Any()
	switch x := a.(type) {
	case nil:
		return v
	case error:
		return slog.StringValue(Redact(x.Error()))
	case *url.URL:
		if x == nil {
			return v
		}
		return slog.StringValue(Redact(x.Redacted()))
	case url.URL:
		return slog.StringValue(Redact(x.Redacted()))
	case []byte:
		return v
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = Redact(s)
		}
		return slog.AnyValue(out)
	}
	if depth >= maxDepth {
		return v
	}
	rv := reflect.ValueOf(a)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return v
		}
		if rv.Type().Implements(jsonMarshaler) || rv.Type().Implements(textMarshaler) {
			return v
		}
		rv = rv.Elem()
	}
	t := rv.Type()
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return v
	}
	switch rv.Kind() {
	case reflect.Struct:
		return slog.GroupValue(structAttrs(rv, depth)...)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return v
		}
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		out := make([]slog.Attr, 0, len(keys))
		for _, k := range keys {
			out = append(out, redactAttr(slog.Any(k.String(), rv.MapIndex(k).Interface()), depth+1))
		}
		return slog.GroupValue(out...)
	}
	return v
}

// structAttrs lists the exported fields of a struct like encoding/json does:
// json tags rename or skip, anonymous struct fields are flattened.
func structAttrs(rv reflect.Value, depth int) []slog.Attr {
	t := rv.Type()
	var out []slog.Attr
	for i := range t.NumField() {
		f := t.Field(i)
		fv := rv.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			if _, ok := valueInterface(fv).(slog.LogValuer); !ok {
				out = append(out, structAttrs(fv, depth+1)...)
				continue
			}
		}
		if !f.IsExported() || !fv.CanInterface() {
			continue
		}
		name := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
			continue
		} else if tag != "" {
			name = tag
		}
		out = append(out, redactAttr(slog.Any(name, fv.Interface()), depth+1))
	}
	return out
}

func valueInterface(v reflect.Value) any {
	if !v.CanInterface() {
		return nil
	}
	return v.Interface()
}
