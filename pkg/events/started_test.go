package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/pkg/events"
)

// startedEvent is session s1's start with data (JSON text).
func startedEvent(data string) event.Event {
	return eventtest.NewSession("", "s1").Event("start", events.TypeSessionStarted, []byte(data))
}

func TestSessionStartedIngest(t *testing.T) {
	s, err := events.ValidateIngest(startedEvent(`{"parent_session":"s0","cwd":"/repo","ephemeral":true,"user_id":"u-1","agent_id":"a","memory_policy":{"self":{"enabled":true},"peer":{"enabled":false},"memory_types":["profile"]}}`), "acme")
	if err != nil {
		t.Fatal(err)
	}
	st := s.Started
	if st == nil || st.ParentSession != "s0" || !st.Ephemeral || st.UserID != "u-1" || st.MemoryPolicy == nil || !st.MemoryPolicy.Self.Enabled || st.MemoryPolicy.MemoryTypes[0] != "profile" {
		t.Fatalf("decoded %+v", st)
	}
	if s, err := events.ValidateIngest(startedEvent(`{}`), "acme"); err != nil || s.Started == nil {
		t.Fatalf("empty started: %v", err)
	}
	for data, field := range map[string]string{
		`{"parent_session":"a.b"}`:                        "data.parent_session",
		`{"user_id":"u/1"}`:                               "data.user_id",
		`{"memory_policy":{"memory_types":["pro file"]}}`: "data.memory_policy.memory_types[0]",
		`{"cwd":"` + strings.Repeat("x", 5000) + `"}`:     "data.cwd",
		`{"ephemeral":"yes"}`:                             "",
		`{"unknown_field":1}`:                             "",
	} {
		_, err := events.ValidateIngest(startedEvent(data), "acme")
		var fe *events.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%.40s: want a field error, got %v", data, err)
			continue
		}
		if field != "" && fe.Field != field {
			t.Errorf("%.40s: field %q, want %q", data, fe.Field, field)
		}
	}
}
