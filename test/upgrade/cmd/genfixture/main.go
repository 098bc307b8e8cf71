// Command genfixture records an upgrade fixture: it builds `recall` from
// an earlier commit in a temporary git worktree, runs `recall up` from it
// on an empty data directory, runs the upgrade package's workload against
// it, stops it, and archives the data directory with what that release
// answered (expect.json) as test/upgrade/testdata/<commit>.tar.gz.
//
//	go run ./test/upgrade/cmd/genfixture --commit d6990a8
//
// Run it from the repository at each release, with the release's commit;
// docs/operations.md ("Upgrades") says which fixture the test holds.
//
// With --rollback it checks the other direction instead, once, by hand:
// today's recall (built from the working tree) runs on that commit's
// fixture and writes more (upgrade.WriteMore), then the commit's recall
// runs on the result and must serve every answer today's gave (it may lack
// fields added since) and extract again.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/recallhq/recall/test/upgrade"
)

func main() {
	commit := flag.String("commit", "", "the earlier commit (or tag) whose recall writes the fixture (required)")
	out := flag.String("out", "", "the archive to write (default test/upgrade/testdata/<short commit>.tar.gz)")
	rollback := flag.Bool("rollback", false, "instead: check that the commit's recall serves what today's wrote on its fixture")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	do := run
	if *rollback {
		do = checkRollback
	}
	if err := do(ctx, *commit, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genfixture:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, commit, out string) error {
	if commit == "" {
		return fmt.Errorf("--commit is required (the release whose data the fixture holds)")
	}
	full, err := git("rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join("test", "upgrade", "testdata", full[:7]+".tar.gz")
	}
	tmp, err := os.MkdirTemp("", "recall-genfixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := buildAt(ctx, full, tmp)
	if err != nil {
		return err
	}
	stage := filepath.Join(tmp, "stage")
	x, err := record(ctx, bin, filepath.Join(stage, "data"))
	if err != nil {
		return err
	}
	x.Commit = full
	b, _ := json.MarshalIndent(x, "", "  ")
	if err := os.WriteFile(filepath.Join(stage, "expect.json"), b, 0o644); err != nil {
		return err
	}
	return write(out, stage)
}

// buildAt builds recall at commit full in a temporary git worktree under
// tmp and returns the binary's path.
func buildAt(ctx context.Context, full, tmp string) (string, error) {
	src := filepath.Join(tmp, "src")
	if _, err := git("worktree", "add", "--detach", src, full); err != nil {
		return "", err
	}
	defer git("worktree", "remove", "--force", src)
	bin := filepath.Join(tmp, "recall-"+full[:7])
	fmt.Fprintf(os.Stderr, "building recall at %s\n", full[:12])
	if err := goBuild(ctx, src, bin); err != nil {
		return "", fmt.Errorf("building recall at %s: %w", full, err)
	}
	return bin, nil
}

// goBuild builds ./cmd/recall of the tree at dir into bin.
func goBuild(ctx context.Context, dir, bin string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/recall")
	build.Dir, build.Stdout, build.Stderr = dir, os.Stderr, os.Stderr
	return build.Run()
}

// record runs the workload on a fresh `recall up` and stops it cleanly.
func record(ctx context.Context, bin, data string) (*upgrade.Expect, error) {
	u, err := upgrade.StartUp(ctx, bin, data)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	x, err := upgrade.Write(wctx, u.API)
	if stopErr := u.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, fmt.Errorf("%w\nrecall up's output:\n%s", err, u.Output())
	}
	return x, nil
}

func write(out, stage string) error {
	var buf bytes.Buffer
	if err := upgrade.Pack(&buf, stage); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%d KiB)\n", out, buf.Len()>>10)
	return nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, b)
	}
	return strings.TrimSpace(string(b)), nil
}
