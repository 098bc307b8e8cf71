package console

import "testing"

func TestHalveKeepsPeaksAndTheLastPoint(t *testing.T) {
	var pts []point
	for i := range 11 {
		pts = append(pts, point{Seq: uint64(i + 1), Tokens: int64(i % 4 * 10)})
	}
	got := halve(pts)
	if len(got) != 6 || got[len(got)-1] != pts[10] {
		t.Fatalf("halve: %v", got)
	}
	for _, want := range []uint64{4, 8} { // the peaks (30 tokens) survive
		found := false
		for _, p := range got {
			found = found || p.Seq == want
		}
		if !found {
			t.Fatalf("peak at seq %d lost: %v", want, got)
		}
	}
	s := &series{}
	for i := range 3 * maxCachedPoints {
		s.points = append(s.points, point{Seq: uint64(i + 1)})
		if len(s.points) > maxCachedPoints {
			s.points = halve(s.points)
		}
	}
	if len(s.points) > maxCachedPoints || s.points[len(s.points)-1].Seq != 3*maxCachedPoints {
		t.Fatalf("bounded series: %d points, last %v", len(s.points), s.points[len(s.points)-1])
	}
}
