package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestEvalLTMQuick runs `recall eval --ltm --quick --json` in-process:
// 20 sessions of each of three users through the long-term memory service
// on an embedded server. The output's "ltm" section has, per user, the
// figures after 10 and 20 sessions, and per memory type entries,
// ungrounded, duplicates in percent and superseded values still stated;
// the hygiene targets the merge meets (ungrounded 0, duplicates ≤ 2 %)
// hold.
func TestEvalLTMQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 60 sessions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if err := run(ctx, []string{"eval", "--ltm", "--quick", "--json", "--quiet"}, &buf); err != nil {
		t.Fatalf("eval --ltm: %v", err)
	}
	// Decoded as plain JSON: the field names are the contract.
	type typ struct {
		Type              string   `json:"type"`
		Entries           *int     `json:"entries"`
		Ungrounded        *int     `json:"ungrounded"`
		DuplicatesPercent *float64 `json:"duplicates_percent"`
		SupersededStated  *int     `json:"superseded_stated"`
	}
	var out struct {
		LTM *struct {
			SessionsPerUser int `json:"sessions_per_user"`
			Users           []struct {
				User  string `json:"user"`
				After []struct {
					Sessions         int      `json:"sessions"`
					ContextTokens    int      `json:"context_tokens"`
					SupersededStated []string `json:"superseded_stated"`
					Current          int      `json:"current"`
					CurrentHeld      *int     `json:"current_held"`
					Types            []typ    `json:"types"`
				} `json:"after"`
			} `json:"users"`
		} `json:"ltm"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("eval --ltm output is not one JSON object: %v\n%s", err, buf.String())
	}
	if out.LTM == nil || out.LTM.SessionsPerUser != quickLTMSessions || len(out.LTM.Users) != 3 {
		t.Fatalf("ltm section %+v, want 3 users of %d sessions\n%s", out.LTM, quickLTMSessions, buf.String())
	}
	for _, u := range out.LTM.Users {
		if len(u.After) != 2 || u.After[0].Sessions != 10 || u.After[1].Sessions != quickLTMSessions {
			t.Fatalf("%s: %d checkpoints, want after 10 and %d sessions", u.User, len(u.After), quickLTMSessions)
		}
		for _, c := range u.After {
			if c.ContextTokens == 0 || c.SupersededStated == nil || len(c.Types) == 0 || c.Current == 0 || c.CurrentHeld == nil {
				t.Errorf("%s after %d: context %d tokens, superseded_stated %v, %d types, current %d (held %v)", u.User, c.Sessions, c.ContextTokens, c.SupersededStated, len(c.Types), c.Current, c.CurrentHeld)
			}
			for _, ty := range c.Types {
				if !strings.HasPrefix(ty.Type, "self/") || ty.Entries == nil || ty.Ungrounded == nil || ty.DuplicatesPercent == nil || ty.SupersededStated == nil {
					t.Fatalf("%s after %d: type figures %+v incomplete", u.User, c.Sessions, ty)
				}
				if *ty.Entries == 0 || *ty.Ungrounded != 0 || *ty.DuplicatesPercent > 2 {
					t.Errorf("%s after %d: %s has %d entries, %d ungrounded, %.1f %% duplicates", u.User, c.Sessions, ty.Type, *ty.Entries, *ty.Ungrounded, *ty.DuplicatesPercent)
				}
			}
		}
	}
}

// TestEvalLTMFlags: --ltm-sessions needs --ltm and a positive count.
func TestEvalLTMFlags(t *testing.T) {
	for _, args := range [][]string{{"eval", "--ltm-sessions", "5"}, {"eval", "--ltm", "--ltm-sessions", "-1"}} {
		var buf bytes.Buffer
		err := run(context.Background(), args, &buf)
		if err == nil || !strings.Contains(err.Error(), "--ltm") {
			t.Errorf("%v: error %v, want one naming --ltm", args, err)
		}
	}
}
