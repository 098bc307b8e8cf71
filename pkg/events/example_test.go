package events_test

import (
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/events"
)

// Ids become subject tokens, so anything that could change a subject's
// meaning is rejected with the offending character and its position.
func ExampleValidateID() {
	for _, id := range []string{"3f2b9c1e-7d4a-4b8e-9c2f-1a2b3c4d5e6f", "team.alpha", "a b"} {
		fmt.Println(id, "→", events.ValidateID(id))
	}
	// Output:
	// 3f2b9c1e-7d4a-4b8e-9c2f-1a2b3c4d5e6f → <nil>
	// team.alpha → invalid id: character '.' at byte 4 is not allowed (use A-Z a-z 0-9 - _)
	// a b → invalid id: character ' ' at byte 1 is not allowed (use A-Z a-z 0-9 - _)
}

// A transcript message as a platform publishes it: the session id is the
// CloudEvents subject; the tenant comes from authentication.
func ExampleValidateIngest() {
	e := event.New()
	e.SetID("msg-1")
	e.SetSource("/agents/coder")
	e.SetType(events.TypeMessage)
	e.SetSubject("session-42")
	_ = e.SetData(event.ApplicationJSON, map[string]any{
		"uuid": "u1", "role": "user", "content": "Add a --by-month flag.",
	})
	s, err := events.ValidateIngest(e, "acme")
	fmt.Println(err, s.Session, s.Message.Content[0].Text)
	fmt.Println(events.NewLayout(4).Subject(s.Tenant, s.Session))

	e.SetData(event.ApplicationJSON, map[string]any{"uuid": "u1", "role": "robot", "content": "x"})
	_, err = events.ValidateIngest(e, "acme")
	fmt.Println(err)
	// Output:
	// <nil> session-42 Add a --by-month flag.
	// recall.transcript.2.acme.session-42
	// data.role: "robot" is not a role (use "user" or "assistant")
}
