// Package ops serves a service's operational endpoints: /healthz (the process
// is alive), /readyz (its dependencies answer) and /metrics (Prometheus).
package ops

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/recallhq/recall/internal/telemetry"
)

// Handler returns the mux with /healthz, /readyz and /metrics. ready reports
// why the service is not ready, or nil.
func Handler(ready func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", telemetry.MetricsHandler())
	return mux
}

// Serve runs h on addr until ctx is done, then shuts down gracefully. An
// empty addr serves nothing and returns when ctx is done.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving operational endpoints", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
