package mcpserver_test

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
)

// recallBin is the recall binary built once by TestMain.
var recallBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // the tests that need the binary skip
	}
	dir, err := os.MkdirTemp("", "recall-mcp-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	recallBin = filepath.Join(dir, "recall")
	build := exec.Command("go", "build", "-o", recallBin, "github.com/recallhq/recall/cmd/recall")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building recall:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// recallStack is a `recall up` running as a subprocess in open mode (tenant
// "default", the offline LLM provider).
type recallStack struct {
	URL  string // HTTP edge
	NATS string
	log  *bytes.Buffer
}

// startRecall runs `recall up` until the test ends and waits for /readyz.
func startRecall(t *testing.T) *recallStack {
	t.Helper()
	st := &recallStack{log: &bytes.Buffer{}}
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	st.URL, st.NATS = "http://"+httpAddr, "nats://"+natsAddr
	cmd := exec.Command(recallBin, "up", "--data", t.TempDir(), "--http", httpAddr, "--nats-listen", natsAddr)
	cmd.Env = append(cleanEnv(), "RECALL_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = st.log, st.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("recall up log:\n%s", tail(st.log.String(), 4000))
		}
	})
	testpoll.Until(t, 60*time.Second, "recall up to be ready", func() bool {
		resp, err := http.Get(st.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return st
}

// replay stores the importer's coding-session fixture as session.
func (st *recallStack) replay(t *testing.T, session string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	fixture := filepath.Join(filepath.Dir(file), "..", "importer", "testdata", "coding-session.jsonl")
	cmd := exec.Command(recallBin, "replay", fixture, "--session", session, "--http", st.URL)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("recall replay: %v\n%s", err, out)
	}
}

// cleanEnv is the environment without RECALL_* and LLM keys, so the stack
// runs in open mode with the offline provider whatever the developer set.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RECALL_") || strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "OPENAI_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
