package stack

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natsperm"
)

// CredentialsFile is the file, in the data directory, holding the NATS users
// of an authenticated `recall up` (mode 0600).
const CredentialsFile = "nats-credentials.json"

// AdminUser is the unrestricted user of an authenticated `recall up`: it
// provisions the streams and is the operator's user for the CLI.
const AdminUser = "recall-admin"

// User is one NATS user of an authenticated `recall up`.
type User struct {
	Name     string `json:"user"`
	Password string `json:"password"`
	// Service or Tenant names the generated permissions (internal/natsperm);
	// neither means the unrestricted admin.
	Service     string `json:"service,omitempty"`
	Tenant      string `json:"tenant,omitempty"`
	InboxPrefix string `json:"inbox_prefix,omitempty"`
}

// Auth is the authentication of the embedded NATS server when `recall up`
// has tenants (RECALL_TENANTS): the admin, the four service users and one
// user per tenant, with the same generated permissions as production. The
// passwords are kept in Path, so a restart reuses them.
type Auth struct {
	Path  string `json:"-"`
	Users []User `json:"users"`
}

// loadOrCreateAuth reads dir's credentials file, adding users (with fresh
// random passwords) for tenants and services it lacks, and writes it back
// with mode 0600.
func loadOrCreateAuth(dir string, tenants []string) (*Auth, error) {
	a := &Auth{Path: filepath.Join(dir, CredentialsFile)}
	if b, err := os.ReadFile(a.Path); err == nil {
		if err := json.Unmarshal(b, a); err != nil {
			return nil, fmt.Errorf("reading %s: %w (delete it to generate new credentials)", a.Path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	want := []User{{Name: AdminUser}}
	for _, s := range natsperm.Services {
		want = append(want, User{Name: "recall-" + s, Service: s})
	}
	for _, t := range tenants {
		want = append(want, User{Name: "tenant-" + t, Tenant: t, InboxPrefix: natsperm.InboxPrefix(t)})
	}
	for _, w := range want {
		if slices.ContainsFunc(a.Users, func(u User) bool { return u.Name == w.Name }) {
			continue
		}
		pw, err := randomPassword()
		if err != nil {
			return nil, err
		}
		w.Password = pw
		a.Users = append(a.Users, w)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(a, "", "  ")
	if err := os.WriteFile(a.Path, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("writing NATS credentials: %w", err)
	}
	return a, os.Chmod(a.Path, 0o600) // an older file keeps its mode otherwise
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return "", fmt.Errorf("generating a NATS password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// serverUsers are the users for the embedded server's options.
func (a *Auth) serverUsers() ([]*server.User, error) {
	var out []*server.User
	for _, u := range a.Users {
		switch {
		case u.Service != "":
			nu, err := natsperm.Service(u.Service)
			if err != nil {
				return nil, err
			}
			out = append(out, nu.ServerUser(u.Password))
		case u.Tenant != "":
			nu, err := natsperm.Tenant(u.Tenant, u.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, nu.ServerUser(u.Password))
		default:
			out = append(out, &server.User{Username: u.Name, Password: u.Password})
		}
	}
	return out, nil
}

// conn returns c with the credentials of user name (c unchanged when a is
// nil or has no such user).
func (a *Auth) Conn(c natsconn.Config, name string) natsconn.Config {
	if a == nil {
		return c
	}
	for _, u := range a.Users {
		if u.Name == name {
			c.User, c.Password = u.Name, u.Password
		}
	}
	return c
}

// checkOpenListen refuses to serve NATS without authentication anywhere but
// on a loopback address: any process that reaches it could read and change
// every tenant's data.
func checkOpenListen(listen string) error {
	if listen == "" {
		return nil // a random loopback port
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("nats listen address %q: %w", listen, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to serve NATS without authentication on %s: set RECALL_TENANTS (tenant:sha256(token) pairs) "+
		"so the embedded server runs with per-tenant and per-service users, or listen on 127.0.0.1", listen)
}
