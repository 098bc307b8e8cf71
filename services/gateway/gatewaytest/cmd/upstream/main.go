// Command upstream runs the scripted model upstream of package gatewaytest
// from a shell, for the CI scripts that drive real clients through the
// gateway. It prints "upstream listening on http://ADDR" once it serves,
// then serves until SIGINT or SIGTERM; GET /_upstream/requests lists what
// it received.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/recallhq/recall/services/gateway/gatewaytest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

func run() error {
	var s gatewaytest.Script
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: a free port)")
	flag.IntVar(&s.ToolCalls, "tool-calls", 3, "tool calls of a main conversation before the final answer")
	flag.IntVar(&s.AgentToolCalls, "agent-tool-calls", 1, "tool calls of a subagent conversation")
	flag.StringVar(&s.ToolName, "tool", "Bash", "the tool called")
	flag.StringVar(&s.Command, "command", "echo tool call {i}", "the tool input's command ({i}: the call's number)")
	flag.StringVar(&s.Final, "final", "Done.", "the final answer")
	flag.StringVar(&s.Summary, "summary", "", "the answer to a summarization turn (default: a short <summary>)")
	markers := flag.String("summary-markers", strings.Join(gatewaytest.DefaultSummaryMarkers, "|"), "texts of a summarization turn, |-separated")
	flag.DurationVar(&s.Delay, "delay", 0, "pause between stream events")
	flag.Parse()
	s.SummaryMarkers = strings.Split(*markers, "|")
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: gatewaytest.New(s), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("upstream listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
