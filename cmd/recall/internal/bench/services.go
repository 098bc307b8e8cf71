package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// service is one Recall service running in the bench process.
type service struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startService runs run in a goroutine. ready is polled until it returns
// nil, the service returns, or 30 s pass; a service that returns before it
// is ready is reported as skipped with its error (a component that does not
// run yet).
func startService(ctx context.Context, name string, run func(context.Context) error, ready func(context.Context) error) (*service, error) {
	sctx, cancel := context.WithCancel(ctx)
	s := &service{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = run(sctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			cancel()
			if s.err == nil {
				s.err = errors.New("returned at once")
			}
			return nil, skipped(fmt.Sprintf("the %s service does not run: %v", name, s.err))
		default:
		}
		if ready == nil || ready(ctx) == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the %s service was not ready within 30s", name)
		}
		select {
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-s.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop cancels the service and waits for it to return (it drains).
func (s *service) stop() error {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the %s service did not stop within 60s", s.name)
	}
	return s.err
}

// freeAddr returns a loopback address with a free port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// httpReady returns a readiness check of an HTTP server's /healthz.
func httpReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	}
}
