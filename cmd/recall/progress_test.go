package main

import (
	"strings"
	"testing"
	"time"
)

func TestProgressShowsRateAndTimeLeft(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	p := newProgressTo(&b, 1000, "events", true, func() time.Time { return now })
	now = now.Add(2 * time.Second)
	p.set(250) // 125/s, 750 left: 6 s
	p.done()
	out := b.String()
	for _, want := range []string{"250/1000 events", "125/s", "6s left"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress %q lacks %q", out, want)
		}
	}
	var off strings.Builder
	q := newProgressTo(&off, 10, "events", false, time.Now)
	q.set(5)
	q.done()
	if off.Len() != 0 {
		t.Errorf("a bar that is off wrote %q", off.String())
	}
}
