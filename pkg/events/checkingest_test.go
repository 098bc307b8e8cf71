package events_test

import (
	"reflect"
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
)

// TestCheckIngestAgreesWithValidateIngest: on generated sessions CheckIngest
// returns the event ValidateIngest does, checks the messages without
// decoding them, and leaves the caller's event unstamped.
func TestCheckIngestAgreesWithValidateIngest(t *testing.T) {
	evs := benchgen.New(3).Interleaved(benchgen.SessionIDs("s", 20), 2000)
	undecoded := 0
	for _, e := range evs {
		full, err := events.ValidateIngest(e, "acme")
		if err != nil {
			t.Fatalf("ValidateIngest %s: %v", e.ID(), err)
		}
		got, err := events.CheckIngest(e, "acme")
		if err != nil {
			t.Fatalf("CheckIngest %s: %v", e.ID(), err)
		}
		if !reflect.DeepEqual(got.Event, full.Event) || got.Session != full.Session {
			t.Fatalf("%s: CheckIngest's event differs:\n%v\n%v", e.ID(), got.Event, full.Event)
		}
		if _, ok := e.Extensions()[events.ExtTenant]; ok {
			t.Fatalf("%s: the caller's event was stamped", e.ID())
		}
		if e.Type() == events.TypeMessage && got.Message == nil {
			undecoded++
		}
	}
	if undecoded == 0 {
		t.Fatal("CheckIngest decoded every message: the one-pass check was never certain")
	}
	t.Logf("%d of %d events checked without decoding", undecoded, len(evs))
}
