package events

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

func TestValidateID(t *testing.T) {
	for _, c := range []struct {
		id   string
		want string // "" = valid
	}{
		{"sess-01_AB", ""},
		{"7d1c2b9e-3f4a-4c5d-9e8f-0a1b2c3d4e5f", ""},
		{strings.Repeat("a", MaxIDLength), ""},
		{"", "invalid id: empty"},
		{strings.Repeat("a", MaxIDLength+1), "invalid id: 129 bytes, at most 128 allowed"},
		{"a.b", "invalid id: character '.' at byte 1 is not allowed (use A-Z a-z 0-9 - _)"},
		{"*", "invalid id: character '*' at byte 0 is not allowed (use A-Z a-z 0-9 - _)"},
		{"a>", "invalid id: character '>' at byte 1 is not allowed (use A-Z a-z 0-9 - _)"},
		{"a b", "invalid id: character ' ' at byte 1 is not allowed (use A-Z a-z 0-9 - _)"},
		{"a\tb", `invalid id: character '\t' at byte 1 is not allowed (use A-Z a-z 0-9 - _)`},
		{"é", "invalid id: non-ASCII byte 0xc3 at byte 0 is not allowed (use A-Z a-z 0-9 - _)"},
	} {
		err := ValidateID(c.id)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ValidateID(%q) = %v, want nil", c.id, err)
		case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, ErrInvalidID)):
			t.Errorf("ValidateID(%q) = %v, want %q", c.id, err, c.want)
		}
	}
}

// FuzzValidateID checks that an accepted id can never change the shape of
// a subject or a KV key, and that subjects built from valid ids split back.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"s1", "a.b", "*", ">", "a b", "", "\x00", "é", "tenant-01_X", strings.Repeat("z", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if ValidateID(id) != nil {
			return
		}
		if id == "" || len(id) > MaxIDLength {
			t.Fatalf("accepted length %d", len(id))
		}
		for _, r := range id {
			if strings.ContainsRune(".*> ", r) || unicode.IsControl(r) || unicode.IsSpace(r) || r > unicode.MaxASCII {
				t.Fatalf("accepted %q containing %q", id, r)
			}
		}
		layout := NewLayout(DefaultShards)
		for _, subj := range []string{layout.Subject("t", id), ExtractSubject(id, id), APISubject(VerbCompact, id, "s"), EventsSubject(KindCompactionServed, "t", id)} {
			if n := strings.Count(subj, "."); n < 3 {
				t.Fatalf("subject %q has %d tokens", subj, n+1)
			}
		}
		tenant, session, ok := SplitSessionSubject(layout.Subject(id, id+"x"))
		if !ok && len(id) < MaxIDLength || ok && (tenant != id || session != id+"x") {
			t.Fatalf("split(%q) = %q %q %v", layout.Subject(id, id+"x"), tenant, session, ok)
		}
		if k, t2, s2, ok2 := ParseTranscriptSubject(layout.Subject(id, id+"x")); ok != ok2 || ok && (t2 != id || s2 != id+"x" || k != layout.Shard(id, id+"x")) {
			t.Fatalf("ParseTranscriptSubject disagrees with SplitSessionSubject on %q", id)
		}
	})
}
