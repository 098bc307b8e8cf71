package reliability

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc/extractortest"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// startLimit is how long a service may take to become ready on a cluster
// with a node down or returning ("a few seconds"; generous for a loaded
// two-core machine).
const startLimit = 15 * time.Second

// running is a service started by startServices; done receives Run's
// result when it returns.
type running struct {
	name  string
	ready time.Duration
	done  chan error
	stop  func() error
}

// startServices starts one instance of each service against c and waits
// until each reports ready (/readyz answers 200; ingest: Start returned and
// its /readyz answers 200). It fails the test when a service exits or is
// not ready within startLimit.
func startServices(t *testing.T, c *natstest.Cluster, prov provision.Config, tag string) []*running {
	t.Helper()
	log := &logSink{}
	base := telemetry.NewLogger(log, telemetry.Config{LogLevel: "debug", LogFormat: "json"})
	nc := natsconn.Config{URL: c.URLs()}
	var out []*running
	launch := func(name, opsAddr string, run func(ctx context.Context) error) {
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{name: name + "/" + tag, done: make(chan error, 1)}
		start := time.Now()
		go func() { r.done <- run(ctx) }()
		r.stop = func() error {
			cancel()
			select {
			case err := <-r.done:
				return err
			case <-time.After(20 * time.Second):
				return fmt.Errorf("%s did not stop", r.name)
			}
		}
		r.ready = waitReady(t, r, "http://"+opsAddr+"/readyz", start)
		out = append(out, r)
	}
	logger := func(name string) *slog.Logger { return base.With("service", name+"/"+tag) }

	ingestAddr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	launch("ingest", ingestAddr, func(ctx context.Context) error {
		s, err := ingestsvc.Start(ctx, ingestsvc.Config{NATS: nc, Config: prov, HTTPAddr: ingestAddr,
			Tenants: tenantA + ":" + ingestsvc.HashToken(tokenA)}, logger("ingest"))
		if err != nil {
			return err
		}
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return s.Shutdown(sctx)
	})
	ops := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	launch("trigger", ops, func(ctx context.Context) error {
		return triggersvc.Run(ctx, triggersvc.Config{NATS: nc, Config: prov, OpsAddr: ops, AckWait: 5 * time.Second,
			PinnedTTL: 2 * time.Second}, logger("trigger"))
	})
	eops := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	launch("extractor", eops, func(ctx context.Context) error {
		return extractorsvc.Run(ctx, extractorsvc.Config{NATS: nc, Config: prov, OpsAddr: eops, WorkerID: "x-" + tag,
			Provider: &extractortest.EditProvider{}, AckWait: 5 * time.Second, HeartbeatTTL: 2 * time.Second,
			FetchWait: time.Second, DrainTimeout: 2 * time.Second}, logger("extractor"))
	})
	cops := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	launch("compactor", cops, func(ctx context.Context) error {
		return compactorsvc.Run(ctx, compactorsvc.Config{NATS: nc, Config: prov, OpsAddr: cops}, logger("compactor"))
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs (%s):\n%s", tag, log.tail(60))
		}
	})
	return out
}

// waitReady polls url until it answers 200, failing when r exits first or
// startLimit passes; it returns the time from start to ready.
func waitReady(t *testing.T, r *running, url string, start time.Time) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-r.done:
			t.Fatalf("%s exited while starting: %v", r.name, err)
		default:
		}
		if resp, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		if time.Since(start) > startLimit {
			t.Fatalf("%s not ready after %v", r.name, startLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServicesStartWhileANodeIsDown starts every service on a three-node
// cluster with R3 streams while the JetStream meta leader goes down, then
// restarts that node and at once starts every service again: each becomes
// ready within a few seconds and none exits; all stop cleanly.
func TestServicesStartWhileANodeIsDown(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prov := provision.Config{Replicas: 3, Partitions: 4, MemoryHistory: 64}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatalf("provisioning R3: %v", err)
	}
	victim := c.MetaLeader()
	if victim < 0 {
		t.Fatal("no JetStream meta leader")
	}
	// The services start while the node goes down and the others elect
	// new leaders.
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.Stop(victim) }()
	down := startServices(t, c, prov, "down")
	<-stopped
	t.Logf("stopped %s (the meta leader)", c.Name(victim))

	c.Start(victim)
	t.Logf("restarted %s", c.Name(victim))
	back := startServices(t, c, prov, "returning")

	all := append(down, back...)
	for _, r := range all {
		select {
		case err := <-r.done:
			t.Fatalf("%s exited: %v", r.name, err)
		default:
		}
		t.Logf("%-20s ready after %v", r.name, r.ready.Round(time.Millisecond))
		fmt.Printf("RELIABILITY startup: service=%s ready_ms=%d\n", r.name, r.ready.Milliseconds())
	}
	for _, r := range all {
		if err := r.stop(); err != nil {
			t.Errorf("%s stopped with %v", r.name, err)
		}
	}
}
