package events

import "testing"

// TestShardGolden pins where sessions live. The values were computed
// outside Go (FNV-1a 32 of tenant+session, mod S, in Python): changing
// the function strands every stored transcript, so this must never change.
func TestShardGolden(t *testing.T) {
	for _, c := range []struct {
		tenant, session string
		shards, want    int
	}{
		{"acme", "s1", 1, 0},
		{"acme", "s1", 4, 3},
		{"acme", "s1", 12, 11},
		{"acme", "s2", 4, 2},
		{"acme", "s2", 16, 2},
		{"t", "session-0001", 12, 7},
		{"tenant_42", "01HZX3J5Q8V9K2M7N4P6R8T0WB", 12, 3},
		{"tenant_42", "01HZX3J5Q8V9K2M7N4P6R8T0WB", 16, 11},
		{"a", "b", 16, 10},
		{"ab", "c", 16, 11},
	} {
		l := NewLayout(c.shards)
		if got := l.Shard(c.tenant, c.session); got != c.want {
			t.Errorf("shard of %s/%s among %d = %d, want %d", c.tenant, c.session, c.shards, got, c.want)
		}
		stream, subject := l.Stream(c.tenant, c.session), l.Subject(c.tenant, c.session)
		if want := TranscriptShardStream(c.want); stream != want {
			t.Errorf("stream %q, want %q", stream, want)
		}
		k, tenant, session, ok := ParseTranscriptSubject(subject)
		if !ok || k != c.want || tenant != c.tenant || session != c.session {
			t.Errorf("ParseTranscriptSubject(%q) = %d %q %q %v", subject, k, tenant, session, ok)
		}
	}
}

func TestLayoutBounds(t *testing.T) {
	if NewLayout(0).Shards() != 1 || NewLayout(-3).Shards() != 1 || NewLayout(MaxShards+5).Shards() != MaxShards {
		t.Fatal("NewLayout does not clamp to 1..MaxShards")
	}
	if got := NewLayout(3).Streams(); len(got) != 3 || got[2] != "RECALL_TRANSCRIPT_2" {
		t.Fatalf("Streams() = %v", got)
	}
	for _, bad := range []string{"recall.transcript.acme.s1", "recall.transcript.x.acme.s1", "recall.transcript.-1.acme.s1",
		"recall.transcript.1.acme", "recall.transcript.1.ac me.s1", "recall.other.1.acme.s1"} {
		if _, _, _, ok := ParseTranscriptSubject(bad); ok {
			t.Errorf("ParseTranscriptSubject(%q) accepted", bad)
		}
	}
}
