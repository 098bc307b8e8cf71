package events_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// TestProblemWire: each kind of problem is written with the members, in
// the order, the edge has always answered with, and reads back the same;
// "errors" reads as event results when they have a status, else as the
// fields of an invalid configuration.
func TestProblemWire(t *testing.T) {
	base := events.ProblemTypeBase
	ev := events.EventResult{Index: 0, ID: "e-18", Status: 400, Field: "subject", Error: "bad id"}
	events1 := newProblem("invalid-event", 400, "subject: bad id")
	events1.Rejected, events1.Errors, events1.Results = 1, []events.EventResult{ev}, []events.EventResult{ev}
	config := newProblem("invalid-config", 422, "1 invalid field(s); see errors")
	config.FieldErrors = []events.ConfigFieldError{{Field: "bogus", Error: "unknown field"}}
	ambiguous := newProblem("ambiguous-reference", 409, "matches 2")
	ambiguous.Ref, ambiguous.Candidates = "fix", []events.Candidate{{Session: "s1", Name: "fix"}, {Session: "s2", Name: "fix-2", Description: "d"}}
	for _, tc := range []struct {
		name string
		p    *events.Problem
		want string
	}{
		{"events", events1, `{"type":"` + base + `invalid-event","title":"Bad Request","status":400,"detail":"subject: bad id","rejected":1,` +
			`"errors":[{"index":0,"id":"e-18","status":400,"field":"subject","error":"bad id"}],` +
			`"results":[{"index":0,"id":"e-18","status":400,"field":"subject","error":"bad id"}]}`},
		{"config", config, `{"type":"` + base + `invalid-config","title":"Unprocessable Entity","status":422,` +
			`"detail":"1 invalid field(s); see errors","errors":[{"field":"bogus","error":"unknown field"}]}`},
		{"ambiguous", ambiguous, `{"type":"` + base + `ambiguous-reference","title":"Conflict","status":409,"detail":"matches 2",` +
			`"candidates":[{"session":"s1","name":"fix"},{"session":"s2","name":"fix-2","description":"d"}],"ref":"fix"}`},
		{"bare", newProblem("timeout", 504, ""), `{"type":"` + base + `timeout","title":"Gateway Timeout","status":504}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.p)
			if err != nil || string(b) != tc.want {
				t.Fatalf("encoded %s (%v)\nwant    %s", b, err, tc.want)
			}
			var back events.Problem
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, tc.p) {
				t.Fatalf("decoded %+v (%v), want %+v", back, err, *tc.p)
			}
		})
	}
	if k := ambiguous.Kind(); k != "ambiguous-reference" {
		t.Fatalf("kind %q", k)
	}
}

func newProblem(kind string, status int, detail string) *events.Problem {
	return &events.Problem{Type: events.ProblemTypeBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}
