package ingestsvc

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/console"
)

// DefaultTenant is the tenant every request belongs to when no tenants are
// configured (open mode, for a single user on localhost).
const DefaultTenant = "default"

// ErrUnauthenticated is returned by Authenticate for a missing, malformed or
// unknown bearer token.
var ErrUnauthenticated = errors.New("missing or unknown bearer token")

// Auth maps bearer tokens to tenants. Tokens are configured as SHA-256
// hashes, so the configuration holds no secret that grants access. It is
// safe for concurrent use.
type Auth struct {
	tenants   []tenantToken
	operators [][sha256.Size]byte
}

type tenantToken struct {
	tenant string
	hash   [sha256.Size]byte
}

// NewAuth parses spec, a comma-separated list of "tenant:sha256hex" pairs
// (whitespace around items is ignored). A tenant may appear several times
// with different tokens (rotation). An empty spec yields open mode: every
// request is DefaultTenant.
func NewAuth(spec string) (*Auth, error) {
	a := &Auth{}
	for _, item := range splitList(spec) {
		tenant, hx, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("parsing tenants: %q is not tenant:sha256hex", item)
		}
		if err := events.ValidateID(tenant); err != nil {
			return nil, fmt.Errorf("parsing tenants: tenant %q: %w", tenant, err)
		}
		b, err := hex.DecodeString(strings.ToLower(hx))
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("parsing tenants: tenant %q: token hash must be 64 hex digits (sha256 of the token)", tenant)
		}
		t := tenantToken{tenant: tenant}
		copy(t.hash[:], b)
		a.tenants = append(a.tenants, t)
	}
	return a, nil
}

// Open reports whether no tenants are configured: every request is served
// as DefaultTenant without authentication.
func (a *Auth) Open() bool { return len(a.tenants) == 0 }

// Tenants returns the configured tenant names (with repeats for rotated
// tokens).
func (a *Auth) Tenants() []string {
	out := make([]string, len(a.tenants))
	for i, t := range a.tenants {
		out[i] = t.tenant
	}
	return out
}

// Authenticate returns the tenant of the request's "Authorization: Bearer"
// token, or ErrUnauthenticated. In open mode it returns DefaultTenant for any
// request. The token is hashed and compared with every configured hash in
// constant time, so timing reveals neither the token nor which tenant
// matched. The tenant never comes from anything but the token.
func (a *Auth) Authenticate(r *http.Request) (string, error) {
	if a.Open() {
		return DefaultTenant, nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", ErrUnauthenticated
	}
	return a.TenantOf(strings.TrimSpace(token))
}

// TenantOf returns the tenant whose token is token, or ErrUnauthenticated.
func (a *Auth) TenantOf(token string) (string, error) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.tenants {
		if subtle.ConstantTimeCompare(sum[:], a.tenants[i].hash[:]) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return "", ErrUnauthenticated
	}
	return a.tenants[found].tenant, nil
}

// SetOperators parses spec, a comma-separated list of SHA-256 hex hashes of
// operator tokens (RECALL_OPERATOR_TOKENS). Operator tokens open the
// console on every tenant; they are not tenant tokens (the /v1 API refuses
// them).
func (a *Auth) SetOperators(spec string) error {
	a.operators = nil
	for _, hx := range splitList(spec) {
		b, err := hex.DecodeString(strings.ToLower(hx))
		if err != nil || len(b) != sha256.Size {
			return fmt.Errorf("parsing operator tokens: %q must be 64 hex digits (sha256 of the token)", hx)
		}
		var h [sha256.Size]byte
		copy(h[:], b)
		a.operators = append(a.operators, h)
	}
	return nil
}

// Identify is the console's authentication: an operator token, or a tenant
// token (its tenant only). In open mode every request is an operator of
// DefaultTenant's single-user installation.
func (a *Auth) Identify(r *http.Request) (console.Identity, error) {
	if a.Open() {
		return console.Identity{Operator: true}, nil
	}
	_, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if ok && token != "" {
		sum := sha256.Sum256([]byte(token))
		op := 0
		for i := range a.operators {
			op |= subtle.ConstantTimeCompare(sum[:], a.operators[i][:])
		}
		if op == 1 {
			return console.Identity{Operator: true}, nil
		}
	}
	tenant, err := a.Authenticate(r)
	if err != nil {
		return console.Identity{}, err
	}
	return console.Identity{Tenant: tenant}, nil
}

// ConsoleTenants are the tenants an operator picks from in the console.
func (a *Auth) ConsoleTenants() []string {
	if a.Open() {
		return []string{DefaultTenant}
	}
	return a.Tenants()
}

// HashToken returns the hex SHA-256 of token, the form RECALL_TENANTS wants
// (the same as `printf %s TOKEN | sha256sum`).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
