// Package natsconn holds the NATS connection settings every Recall service
// shares and turns them into a connection.
package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/envconf"
)

// Config is the connection part of every service's configuration
// (environment variables RECALL_NATS_*).
type Config struct {
	URL      string `envconfig:"URL" default:"nats://127.0.0.1:4222" desc:"NATS server URL(s), comma separated"`
	Creds    string `envconfig:"CREDS" desc:"path of a NATS .creds file (JWT + nkey)"`
	NKeyFile string `envconfig:"NKEY_FILE" desc:"path of an nkey seed file"`
	User     string `envconfig:"USER" desc:"user name for user/password auth"`
	Password string `envconfig:"PASSWORD" secret:"true" desc:"password for user/password auth (secret)"`
	Token    string `envconfig:"TOKEN" secret:"true" desc:"token auth (secret)"`
	TLSCA    string `envconfig:"TLS_CA" desc:"PEM file of the CA that signed the server certificate"`
	TLSCert  string `envconfig:"TLS_CERT" desc:"client certificate PEM file (mutual TLS)"`
	TLSKey   string `envconfig:"TLS_KEY" desc:"client key PEM file (mutual TLS)"`
}

// LogValue masks secrets so a Config can be logged as is.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// Options turns the configuration into nats.go options; name identifies the
// client in server monitoring.
func (c Config) Options(name string) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(64 << 20),
		nats.RetryOnFailedConnect(true),
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading nkey seed: %w", err)
		}
		opts = append(opts, o)
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("RECALL_NATS_TLS_CERT and RECALL_NATS_TLS_KEY must be set together")
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

// Connect dials NATS. It retries in the background when the server is not up
// yet (RetryOnFailedConnect), so services may start before NATS does.
// Connection events are logged on slog.Default (see ConnectLogged).
func Connect(c Config, name string) (*nats.Conn, error) { return ConnectLogged(c, name, nil) }

// ConnectLogged is Connect with the connection's events — disconnects,
// reconnects, asynchronous errors, slow consumers — logged on log and
// counted (Handlers).
func ConnectLogged(c Config, name string, log *slog.Logger) (*nats.Conn, error) {
	opts, err := c.Options(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.URL, append(opts, Handlers(name, log)...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", c.URL, err)
	}
	return nc, nil
}
