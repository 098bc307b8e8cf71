package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runProbe lets container health checks run in an image that has no shell,
// curl or wget (the distroless runtime image).
func runProbe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("probe")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: recall probe [-timeout d] <url>", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return fmt.Errorf("building probe request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", fs.Arg(0), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("probing %s: %s: %s", fs.Arg(0), resp.Status, body)
	}
	fmt.Fprintf(stdout, "%s %s", resp.Status, body)
	return nil
}
