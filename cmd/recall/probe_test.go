package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "not ready: nats", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	tests := []struct {
		path    string
		wantErr bool
	}{
		{"/healthz", false},
		{"/readyz", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var out bytes.Buffer
			err := runProbe(context.Background(), []string{srv.URL + tt.path}, &out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("probe %s: err = %v, want error %v", tt.path, err, tt.wantErr)
			}
		})
	}
	if err := runProbe(context.Background(), []string{"http://127.0.0.1:1/healthz"}, &bytes.Buffer{}); err == nil {
		t.Error("probe of a closed port succeeded")
	}
}
