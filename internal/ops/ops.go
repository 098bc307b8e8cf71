// Package ops is a service's operational endpoints: /healthz (the process
// is alive), /readyz (its dependencies answer) and /metrics (Prometheus).
// internal/lifecycle serves them on their own address; ingest serves them
// on its HTTP edge.
package ops

import (
	"net/http"

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
