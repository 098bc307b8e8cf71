package eval

import (
	"slices"
	"testing"
)

// TestHygiene scores two documents: an entry with a word no message said
// is ungrounded, a near copy of an earlier entry of the same document is a
// duplicate, and a superseded value is counted where it is stated.
func TestHygiene(t *testing.T) {
	corpus := map[string]bool{}
	AddCorpus(corpus, "I prefer fixtures in testdata/a, later testdata/b. Reviews go to @kim. We ran go test ./...")
	docs := map[string]string{
		"self/preferences":  "fixtures in testdata/a\nfixtures in testdata/b\nreviews go to @kim\nreviews go to @kim",
		"self/trajectories": "we ran go test\nwe flew to the moon",
	}
	types, stated := Hygiene(docs, corpus, []string{"testdata/a", "@lee"})
	if len(types) != 2 || types[0].Type != "self/preferences" || types[1].Type != "self/trajectories" {
		t.Fatalf("types %+v", types)
	}
	p, tr := types[0], types[1]
	if p.Entries != 4 || p.Ungrounded != 0 || p.Duplicates != 1 || p.DuplicatesPercent != 25 || p.SupersededStated != 1 {
		t.Errorf("preferences %+v, want 4 entries, 0 ungrounded, 1 duplicate (25 %%), 1 superseded stated", p)
	}
	if tr.Entries != 2 || tr.Ungrounded != 1 || tr.Duplicates != 0 || tr.SupersededStated != 0 {
		t.Errorf("trajectories %+v, want 2 entries, 1 ungrounded, no duplicate, none superseded stated", tr)
	}
	if !slices.Equal(stated, []string{"testdata/a"}) {
		t.Errorf("stated %q, want [testdata/a]", stated)
	}
}

// TestStatedIn: a superseded value is stated where it stands as a token of
// its own, not where a value of another fact shares its word.
func TestStatedIn(t *testing.T) {
	for _, tc := range []struct {
		text, value string
		want        bool
	}{
		{"fixtures belong in testdata/alder, that's agreed.", "testdata/alder", true},
		{"Fixtures go in TESTDATA/ALDER.", "testdata/alder", true},
		{"fixtures belong in testdata/alder, that's agreed.", "@alder", false},
		{"fixtures belong in testdata/alder, that's agreed.", "ALDER_", false},
		{"never hand-edit internal/gen/newt.pb.go, it is regenerated", "NEWT_", false},
		{"I prefer WREN_ in front of any environment variable", "@wren", false},
		{"I prefer WREN_ in front of any environment variable", "WREN_", true},
		{"schema changes go past @wren.", "@wren", true},
		{"Save every figure into reports/figures/kestrel/ as SVG", "kestrel", false},
		{"the default profile is kestrel now", "kestrel", true},
		{"tag trailmate-3.11.0 is out", "trailmate-3.1", false},
		{"alert at 1200ms  for\n10m", "1200ms for 10m", true},
		{"post to #inc-chert please", "#inc-chert", true},
	} {
		got := len(statedIn(tc.text, []string{tc.value})) == 1
		if got != tc.want {
			t.Errorf("%q in %q: stated %v, want %v", tc.value, tc.text, got, tc.want)
		}
	}
}
