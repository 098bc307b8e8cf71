package bench

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
)

// ScenarioGateway measures the model gateway against a direct call.
const ScenarioGateway = "gateway"

// GatewayResult measures the model gateway (services/gateway) against a
// direct call to the same scripted upstream in the same run: the latency
// it adds to requests it does not compact (interleaved with direct calls,
// one at a time, keep-alive connections), to a stream's first byte, the
// CPU per request (the process's CPU over the same requests with and
// without the gateway), and the time to answer a compact_20260112 request
// over a 200k-token history from memory (no upstream call). The gateway
// runs attached to Recall (capture on, the compactor in-process).
type GatewayResult struct {
	Skipped      string `json:"skipped,omitempty"`
	Requests     int    `json:"requests"`
	RequestBytes int    `json:"request_bytes"`
	// DirectP50MS and DirectP99MS are the direct calls' latencies.
	DirectP50MS       *float64 `json:"direct_p50_ms"`
	DirectP99MS       *float64 `json:"direct_p99_ms"`
	OverheadP50MS     *float64 `json:"overhead_p50_ms"`
	OverheadP99MS     *float64 `json:"overhead_p99_ms"`
	TTFBOverheadP50MS *float64 `json:"ttfb_overhead_p50_ms"`
	CPUUSPerRequest   *float64 `json:"cpu_us_per_request"`
	// CompactTokens is the history's size (bytes / 4) of the compaction
	// requests; CompactP50MS and CompactP99MS their latencies.
	CompactTokens   int      `json:"compact_tokens"`
	CompactRequests int      `json:"compact_requests"`
	CompactP50MS    *float64 `json:"compact_p50_ms"`
	CompactP99MS    *float64 `json:"compact_p99_ms"`
	// CompactCPUUS is the process's CPU per compaction request through the
	// gateway (the bench client sending the body, the gateway, the
	// compactor, the NATS server: all in this process); CompactFloorCPUUS
	// that of the same compaction asked of the compactor directly
	// (pkg/client, no body, no gateway). The difference is what the
	// gateway and the body's transfer cost, a figure a loaded machine
	// leaves standing where it does not the latencies.
	CompactCPUUS      *float64 `json:"compact_cpu_us"`
	CompactFloorCPUUS *float64 `json:"compact_floor_cpu_us"`
}

// gatewayBench is the scenario's running parts.
type gatewayBench struct {
	up, gw string // base URLs
	hc     *http.Client
}

func runGateway(ctx context.Context, e *env) error {
	r := &e.res.Gateway
	cfg := compactorsvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}
	svc, err := startService(ctx, "compactor", func(ctx context.Context) error {
		return compactorsvc.Run(ctx, cfg, e.log.With("service", "compactor"))
	}, nil)
	if err != nil {
		return err
	}
	defer svc.stop()
	b, stop, err := startGatewayBench(ctx, e)
	if err != nil {
		return err
	}
	defer stop()
	n := 200
	if !e.opts.Quick {
		n = 2000
	}
	if err := b.overhead(ctx, e, r, n); err != nil {
		return err
	}
	return b.compaction(ctx, e, r, map[bool]int{true: 20, false: 100}[e.opts.Quick])
}

// startGatewayBench serves the scripted upstream and a gateway attached to
// Recall on loopback listeners.
func startGatewayBench(ctx context.Context, e *env) (*gatewayBench, func(), error) {
	upL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	upSrv := &http.Server{Handler: gatewaytest.New(gatewaytest.Script{Final: "Done."}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = upSrv.Serve(upL) }()
	up := "http://" + upL.Addr().String()
	g, err := gatewaysvc.New(gatewaysvc.Config{AnthropicURL: up, OpenAIURL: up}, e.log.With("service", "gateway"))
	if err != nil {
		upSrv.Close()
		return nil, nil, err
	}
	g.Attach(ctx, e.nc, e.js)
	gctx, cancel := context.WithCancel(ctx)
	if err := g.AttachConfig(gctx, e.js); err != nil {
		e.progress("   gateway without tenant config: %v", err)
	}
	gwL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		upSrv.Close()
		return nil, nil, err
	}
	gwSrv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = gwSrv.Serve(gwL) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	b := &gatewayBench{up: up, gw: "http://" + gwL.Addr().String() + "/anthropic", hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	return b, func() { cancel(); gwSrv.Close(); upSrv.Close(); tr.CloseIdleConnections() }, nil
}

// call posts body to base/v1/messages and returns the time to the first
// byte of the answer and to its end.
func (b *gatewayBench) call(ctx context.Context, base, session string, body []byte) (ttfb, total time.Duration, status int, err error) {
	req, err := newBenchRequest(ctx, base+"/v1/messages", session, body)
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	one := make([]byte, 1)
	_, _ = io.ReadFull(resp.Body, one)
	ttfb = time.Since(t0)
	_, err = io.Copy(io.Discard, resp.Body)
	return ttfb, time.Since(t0), resp.StatusCode, err
}

func newBenchRequest(ctx context.Context, url, session string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-bench-not-a-key")
	req.Header.Set(gatewaysvc.HeaderRecallSession, session)
	return req, nil
}

func round2(v float64) float64 { return float64(int64(v*100+0.5*sign(v))) / 100 }

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
