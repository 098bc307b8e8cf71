package reliability

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// structured encodes e as a structured-mode CloudEvent body.
func structured(t testing.TB, e event.Event) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHTTPTenantIsolation: over the HTTP edge, the tenant comes from the
// token only. Tenant A's token can neither write, read, extract nor compact
// tenant B's session of the same id, however the request is phrased.
func TestHTTPTenantIsolation(t *testing.T) {
	h := newHarness(t)
	h.Provider = llm.NewOffline()
	h.startTrigger()
	h.startExtractor()
	h.startCompactor()
	base := h.startIngest()
	const shared = "shared"

	post := func(token string, e event.Event) (int, []byte) {
		return httpDo(t, "POST", base+"/v1/events", token, "application/cloudevents+json", structured(t, e))
	}
	// Both tenants write a session with the same id.
	for i := 0; i < 12; i++ {
		if st, b := post(tokenA, transcriptEvent(tenantA, shared, i, 400)); st != 202 {
			t.Fatalf("A's event %d: %d %s", i, st, b)
		}
		if st, b := post(tokenB, transcriptEvent(tenantB, shared, i, 400)); st != 202 {
			t.Fatalf("B's event %d: %d %s", i, st, b)
		}
	}

	t.Run("cannot write as another tenant", func(t *testing.T) {
		e := transcriptEvent(tenantA, shared, 100, 50)
		e.SetExtension(events.ExtTenant, tenantB)
		if st, b := post(tokenA, e); st != 403 {
			t.Fatalf("event claiming tenant B with A's token: %d %s", st, b)
		}
		if st, _ := post("", transcriptEvent(tenantA, shared, 101, 50)); st != 401 {
			t.Fatalf("event without a token: %d", st)
		}
		if st, _ := post(tokenA+"x", transcriptEvent(tenantA, shared, 102, 50)); st != 401 {
			t.Fatalf("event with a wrong token: %d", st)
		}
		r := transcript.NewReader(h.admin, h.prov.Layout())
		for _, tn := range []string{tenantA, tenantB} {
			recs, err := r.Read(context.Background(), tn, shared, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 12 {
				t.Errorf("tenant %s's session holds %d records, want 12", tn, len(recs))
			}
			for _, rec := range recs {
				for _, b := range rec.Message.Content {
					if b.Text != "" && !strings.HasPrefix(b.Text, tn+":") {
						t.Errorf("tenant %s's transcript holds %q", tn, b.Text[:30])
					}
				}
			}
		}
	})

	// B's memory, written as the extractor would.
	memKV, err := h.js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	secretNotes := memoryTemplateWith("SECRET-OF-GLOBEX")
	rec, _ := json.Marshal(events.MemoryRecord{Notes: secretNotes, CoveredSeq: 1 << 40, LastSummarizedSeq: 1 << 40, UpdatedAt: time.Now()})
	revB, err := memKV.Put(context.Background(), events.MemoryKey(tenantB, shared), rec)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("cannot read another tenant's memory", func(t *testing.T) {
		st, b := httpDo(t, "GET", base+"/v1/sessions/"+shared+"/memory", tokenA, "", nil)
		if strings.Contains(string(b), "SECRET-OF-GLOBEX") {
			t.Fatalf("A read B's memory: %d %s", st, b)
		}
		st, b = httpDo(t, "GET", base+"/v1/sessions/"+shared+"/memory", tokenB, "", nil)
		if st != 200 || !strings.Contains(string(b), "SECRET-OF-GLOBEX") {
			t.Fatalf("B's own memory: %d %.200s", st, b)
		}
	})

	t.Run("cannot compact another tenant's session", func(t *testing.T) {
		st, b := httpDo(t, "POST", base+"/v1/sessions/"+shared+"/compact", tokenA, "application/json", []byte(`{}`))
		if strings.Contains(string(b), "SECRET-OF-GLOBEX") || strings.Contains(string(b), tenantB+":") {
			t.Fatalf("A's compaction returned B's data: %d %.300s", st, b)
		}
		st, b = httpDo(t, "POST", base+"/v1/sessions/"+shared+"/compact", tokenB, "application/json", []byte(`{}`))
		if st != 200 || !strings.Contains(string(b), "SECRET-OF-GLOBEX") || strings.Contains(string(b), tenantA+":") {
			t.Fatalf("B's own compaction: %d %.300s", st, b)
		}
	})

	t.Run("cannot extract another tenant's session", func(t *testing.T) {
		st, b := httpDo(t, "POST", base+"/v1/sessions/"+shared+"/extract", tokenA, "application/json", []byte(`{"timeout_ms":20000}`))
		if st != 200 {
			t.Fatalf("A's manual extraction: %d %s", st, b)
		}
		var res events.ExtractResult
		if err := json.Unmarshal(b, &res); err != nil || !res.Success || res.MemoryKey != events.MemoryKey(tenantA, shared) {
			t.Fatalf("A's extraction result %s", b)
		}
		e, err := memKV.Get(context.Background(), events.MemoryKey(tenantB, shared))
		if err != nil || e.Revision() != revB {
			t.Fatalf("B's memory changed by A's extraction: revision %d -> %v (%v)", revB, e, err)
		}
		a, err := memKV.Get(context.Background(), events.MemoryKey(tenantA, shared))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(a.Value()), "SECRET-OF-GLOBEX") || strings.Contains(string(a.Value()), tenantB+":") {
			t.Fatal("A's memory holds B's data")
		}
	})

	t.Run("session paths cannot name another tenant", func(t *testing.T) {
		for _, p := range []string{
			"/v1/sessions/" + tenantB + "." + shared + "/memory",
			"/v1/sessions/" + tenantB + "%2E" + shared + "/memory",
			"/v1/sessions/%2A/memory",
			"/v1/sessions/%3E/memory",
			"/v1/sessions/..%2F" + tenantB + "%2F" + shared + "/memory",
			"/v1/sessions/" + shared + "%00/memory",
		} {
			st, b := httpDo(t, "GET", base+p, tokenA, "", nil)
			if st == 200 || strings.Contains(string(b), "SECRET-OF-GLOBEX") {
				t.Errorf("GET %s: %d %.200s", p, st, b)
			}
		}
	})
}

// memoryTemplateWith returns a filled memory document holding marker.
func memoryTemplateWith(marker string) string {
	return "# Session Title\n_A short and distinctive 5-10 word descriptive title for the session. Super info dense, no filler_\n" + marker + " title\n\n# Current State\n_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\n" + marker + " state\n"
}

// TestIngestLimits: the limits on content blocks and nesting depth hold at
// the real HTTP edge with a precise error, and nothing is stored. (Event,
// batch and body sizes are covered by ingestsvc's TestBadInputs; the default
// event size limit is checked here.)
func TestIngestLimits(t *testing.T) {
	h := newHarness(t)
	base := h.startIngest()
	msg := func(id string, data string) []byte { // a valid envelope around data built to test the limits
		return structured(t, eventtest.NewSession("", "lim").Event(id, events.TypeMessage, []byte(data)))
	}
	blocks := func(n int) string {
		b := make([]string, n)
		for i := range b {
			b[i] = `{"type":"text","text":"x"}`
		}
		return `{"uuid":"u","role":"user","content":[` + strings.Join(b, ",") + `]}`
	}
	deep := func(levels int) string {
		return `{"uuid":"u","role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":` +
			strings.Repeat(`{"a":`, levels) + `1` + strings.Repeat(`}`, levels) + `}]}`
	}
	nestedResults := `{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_result","tool_use_id":"b","content":[{"type":"tool_result","tool_use_id":"c","content":"x"}]}]}]}`
	cases := []struct {
		name   string
		body   []byte
		status int
		detail string
	}{
		{"1024 blocks", msg("b1024", blocks(1024)), 202, ""},
		{"1025 blocks", msg("b1025", blocks(1025)), 400, "more than 1024 content blocks"},
		{"depth 64", msg("d64", deep(61)), 202, ""},
		{"depth 65", msg("d65", deep(62)), 400, "nested deeper than 64 levels"},
		{"tool_result in tool_result in tool_result", msg("n3", nestedResults), 400, "tool_result nested inside tool_result"},
		// Over the inline limit: stored by claim check, not refused.
		{"event over 512 KiB", msg("big", `{"uuid":"u","role":"user","content":"`+strings.Repeat("x", 600<<10)+`"}`), 202, ""},
		{"event over 16 MiB", msg("huge", `{"uuid":"u","role":"user","content":"`+strings.Repeat("x", 16<<20+100<<10)+`"}`), 413, "at most 16777216 allowed"},
	}
	stored := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b := httpDo(t, "POST", base+"/v1/events", tokenA, "application/cloudevents+json", c.body)
			if st != c.status || !strings.Contains(string(b), c.detail) {
				t.Fatalf("status %d %.300s, want %d with %q", st, b, c.status, c.detail)
			}
			if st == 202 {
				stored++
			}
			recs, err := transcript.NewReader(h.admin, h.prov.Layout()).Read(context.Background(), tenantA, "lim", 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != stored {
				t.Fatalf("%d records stored, want %d", len(recs), stored)
			}
		})
	}
}

// tlsFiles writes a self-signed CA, a server certificate for 127.0.0.1 and
// a client certificate signed by the CA; it returns their paths.
type tlsFiles struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func makeTLS(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "recall test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, serial int64, usage x509.ExtKeyUsage, ip bool) ([]byte, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der, kd
	}
	sc, sk := leaf("127.0.0.1", 2, x509.ExtKeyUsageServerAuth, true)
	cc, ck := leaf("recall-service", 3, x509.ExtKeyUsageClientAuth, false)
	return tlsFiles{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", sc), serverKey: write("server-key.pem", "EC PRIVATE KEY", sk),
		clientCert: write("client.pem", "CERTIFICATE", cc), clientKey: write("client-key.pem", "EC PRIVATE KEY", ck),
	}
}

// connectOnce dials with the service connection settings and reports whether
// a round trip succeeded within d (natsconn retries failed connects in the
// background, so a refused connection shows as "never connected").
func connectOnce(t *testing.T, c natsconn.Config, d time.Duration) error {
	t.Helper()
	nc, err := natsconn.Connect(c, "reliability-test")
	if err != nil {
		return err
	}
	defer nc.Close()
	connected := nc.StatusChanged(nats.CONNECTED)
	if !nc.IsConnected() {
		select {
		case <-connected:
		case <-time.After(d):
			if le := nc.LastError(); le != nil {
				return le
			}
			return fmt.Errorf("not connected within %v", d)
		}
	}
	return nc.FlushTimeout(d)
}

// TestNATSTLS: services connect over TLS with RECALL_NATS_TLS_CA, and with
// mutual TLS when the server verifies client certificates; without the CA,
// or without a client certificate where one is required, they do not.
func TestNATSTLS(t *testing.T) {
	f := makeTLS(t)
	for _, mutual := range []bool{false, true} {
		t.Run(fmt.Sprintf("mutual=%v", mutual), func(t *testing.T) {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.serverCert, KeyFile: f.serverKey, CaFile: f.ca, Verify: mutual})
			if err != nil {
				t.Fatal(err)
			}
			s := natstest.StartWith(t, &server.Options{TLSConfig: tc, TLSVerify: mutual, TLSTimeout: 2})
			url := fmt.Sprintf("tls://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
			good := natsconn.Config{URL: url, TLSCA: f.ca}
			if mutual {
				good.TLSCert, good.TLSKey = f.clientCert, f.clientKey
			}
			if err := connectOnce(t, good, 10*time.Second); err != nil {
				t.Fatalf("connecting over TLS: %v", err)
			}
			if err := connectOnce(t, natsconn.Config{URL: url}, time.Second); err == nil {
				t.Fatal("connected without trusting the server's CA")
			}
			if mutual {
				if err := connectOnce(t, natsconn.Config{URL: url, TLSCA: f.ca}, time.Second); err == nil {
					t.Fatal("connected without a client certificate")
				}
			}
			if _, err := (natsconn.Config{URL: url, TLSCA: f.ca, TLSCert: f.clientCert}).Options("x"); err == nil {
				t.Fatal("a client certificate without its key was accepted")
			}
		})
	}
}

// TestNATSNkey: a tenant user authenticated by nkey (RECALL_NATS_NKEY_FILE)
// gets the generated tenant permissions; another seed is refused.
func TestNATSNkey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	dir := t.TempDir()
	seedFile, otherFile := filepath.Join(dir, "user.nk"), filepath.Join(dir, "other.nk")
	_ = os.WriteFile(seedFile, seed, 0o600)
	_ = os.WriteFile(otherFile, otherSeed, 0o600)

	u, err := natsperm.Tenant(tenantA, "")
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.StartWith(t, &server.Options{
		Nkeys: []*server.NkeyUser{u.ServerNkeyUser(pub)},
		Users: []*server.User{{Username: "admin", Password: "admin"}},
	})
	admin, js := s.Connect(t, nats.UserInfo("admin", "admin"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provisionAll(ctx, js); err != nil {
		t.Fatal(err)
	}
	nc, err := natsconn.Connect(natsconn.Config{URL: s.ClientURL(), NKeyFile: seedFile}, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testpoll.Until(t, 10*time.Second, "the nkey user to connect", nc.IsConnected)
	// A request to its own sessions' API reaches the service side.
	api, err := admin.SubscribeSync(events.APISubject(events.VerbIngest, tenantA, "nk"))
	if err != nil {
		t.Fatal(err)
	}
	_ = admin.Flush()
	if err := nc.Publish(events.APISubject(events.VerbIngest, tenantA, "nk"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the nkey user's request did not arrive: %v", err)
	}
	if err := connectOnce(t, natsconn.Config{URL: s.ClientURL(), NKeyFile: otherFile}, time.Second); err == nil {
		t.Fatal("an unknown nkey connected")
	}
	_ = admin
}

// provisionAll creates Recall's streams and buckets with the test sizes.
func provisionAll(ctx context.Context, js jetstream.JetStream) error {
	return provision.Ensure(ctx, js, provision.Config{Partitions: 4})
}
