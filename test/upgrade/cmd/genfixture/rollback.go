package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/recallhq/recall/test/upgrade"
)

// checkRollback runs today's recall on the commit's fixture, writes more,
// then runs the commit's recall on the result and compares what both
// serve.
func checkRollback(ctx context.Context, commit, archive string) error {
	if commit == "" {
		return fmt.Errorf("--commit is required (the release to roll back to)")
	}
	full, err := git("rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return err
	}
	if archive == "" {
		archive = filepath.Join("test", "upgrade", "testdata", full[:7]+".tar.gz")
	}
	tmp, err := os.MkdirTemp("", "recall-rollback-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	old, err := buildAt(ctx, full, tmp)
	if err != nil {
		return err
	}
	today := filepath.Join(tmp, "recall-today")
	if err := goBuild(ctx, ".", today); err != nil {
		return fmt.Errorf("building today's recall: %w", err)
	}
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	err = upgrade.Unpack(f, tmp)
	f.Close()
	if err != nil {
		return err
	}
	data := filepath.Join(tmp, "data")
	sessions := append(upgrade.Sessions, upgrade.SessionNew)
	newer, err := session(ctx, today, data, func(a upgrade.API) (*upgrade.Expect, error) {
		if err := upgrade.WriteMore(ctx, a); err != nil {
			return nil, err
		}
		return upgrade.Read(ctx, a, sessions)
	})
	if err != nil {
		return fmt.Errorf("today's recall on the fixture: %w", err)
	}
	older, err := session(ctx, old, data, func(a upgrade.API) (*upgrade.Expect, error) {
		x, err := upgrade.Read(ctx, a, sessions)
		if err != nil {
			return nil, err
		}
		return x, extractAgain(ctx, a)
	})
	if err != nil {
		return fmt.Errorf("%s's recall after today's: %w", full[:7], err)
	}
	if diffs := compare(older, newer); len(diffs) > 0 {
		return fmt.Errorf("%s's recall serves today's data differently:\n  %s", full[:7], strings.Join(diffs, "\n  "))
	}
	fmt.Fprintf(os.Stderr, "rollback to %s: every answer about %v, the user and the tenant as today's recall gave it; a new extraction works\n", full[:7], sessions)
	return nil
}

// session runs bin up on data, calls do, and stops it cleanly.
func session(ctx context.Context, bin, data string, do func(upgrade.API) (*upgrade.Expect, error)) (*upgrade.Expect, error) {
	u, err := upgrade.StartUp(ctx, bin, data)
	if err != nil {
		return nil, err
	}
	x, err := do(u.API)
	if stopErr := u.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, fmt.Errorf("%w\noutput:\n%s", err, u.Output())
	}
	return x, nil
}

// extractAgain: the older release still extracts what today's stored.
func extractAgain(ctx context.Context, a upgrade.API) error {
	if err := a.Publish(ctx, upgrade.Conversation(upgrade.SessionNew, "older", 2, false)); err != nil {
		return err
	}
	b, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+upgrade.SessionNew+"/extract", map[string]any{"timeout_ms": 60000})
	if err != nil {
		return err
	}
	var r struct{ Success bool }
	if json.Unmarshal(b, &r) != nil || !r.Success {
		return fmt.Errorf("extraction after the rollback: %s", b)
	}
	return nil
}

// compare lists where the older release's answers differ from today's
// (the older may lack fields added since; compactions are compared by
// outcome and summarized record).
func compare(older, newer *upgrade.Expect) []string {
	var diffs []string
	check := func(what string, old, now json.RawMessage) {
		if path, ok := upgrade.SubsetJSON(old, now); !ok {
			diffs = append(diffs, fmt.Sprintf("%s differs at %s", what, path))
		}
	}
	for s, now := range newer.Exports {
		oldLines, nowLines := strings.Split(strings.TrimSpace(older.Exports[s]), "\n"), strings.Split(strings.TrimSpace(now), "\n")
		if len(oldLines) != len(nowLines) {
			diffs = append(diffs, fmt.Sprintf("%s: %d records exported, today %d", s, len(oldLines), len(nowLines)))
		}
		for i := range min(len(oldLines), len(nowLines)) {
			check(fmt.Sprintf("%s record %d", s, i+1), json.RawMessage(oldLines[i]), json.RawMessage(nowLines[i]))
		}
		check(s+" memory", older.Memory[s], newer.Memory[s])
		check(s+" index", older.Index[s], newer.Index[s])
		var o, n struct {
			Outcome          string `json:"outcome"`
			LastSummarizedID string `json:"last_summarized_id"`
		}
		_ = json.Unmarshal(older.Compaction[s], &o)
		_ = json.Unmarshal(newer.Compaction[s], &n)
		if o != n {
			diffs = append(diffs, fmt.Sprintf("%s compaction: %+v, today %+v", s, o, n))
		}
	}
	check("user memory", older.LTM, newer.LTM)
	check("config", older.Config, newer.Config)
	check("config history", older.History, newer.History)
	return diffs
}
