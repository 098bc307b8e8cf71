package ingestsvc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/recallhq/recall/pkg/events"
)

// Errors of checkJSON.
var (
	errDuplicateMember = errors.New("duplicate member name")
	errTooDeep         = errors.New("nested too deep")
)

// jsonFrame is one open object or array of checkJSON's walk.
type jsonFrame struct {
	path      string
	obj       bool
	expectKey bool
	key       string
	index     int
	keys      map[string]struct{}
}

// checkJSON reports whether data is exactly one JSON value in which no
// object repeats a member name, at any depth. JSON parsers disagree on
// which duplicate wins (the first, the last, an error), so a stored event
// with one would mean different things to different readers; it is
// rejected instead, naming the member: `duplicate member name "id" in $`.
// Nesting deeper than maxDepth is an error wrapping errTooDeep, found before
// the walk holds more than maxDepth frames.
func checkJSON(data []byte, maxDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*jsonFrame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF && len(stack) == 0 {
			break
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("invalid JSON: unexpected end of JSON input")
			}
			return fmt.Errorf("invalid JSON: %s", jsonErr(err))
		}
		if len(stack) == 0 {
			if values++; values > 1 {
				return fmt.Errorf("invalid JSON: data after the value at byte %d", dec.InputOffset())
			}
		}
		var top *jsonFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expectKey {
			if tok == json.Delim('}') {
				stack = closeFrame(stack)
				continue
			}
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				return fmt.Errorf("%w %q in %s", errDuplicateMember, key, top.path)
			}
			top.keys[key] = struct{}{}
			top.key, top.expectKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("%w: more than %d levels", errTooDeep, maxDepth)
			}
			f := &jsonFrame{path: childPath(top), obj: tok == json.Delim('{')}
			if f.obj {
				f.expectKey, f.keys = true, map[string]struct{}{}
			}
			stack = append(stack, f)
		case json.Delim(']'):
			stack = closeFrame(stack)
		default:
			valueDone(top)
		}
	}
	return nil
}

// childPath is the path of the value top is about to hold.
func childPath(top *jsonFrame) string {
	switch {
	case top == nil:
		return "$"
	case top.obj:
		return top.path + "." + top.key
	default:
		return top.path + "[" + strconv.Itoa(top.index) + "]"
	}
}

// closeFrame pops the innermost frame; its parent's value is then done.
func closeFrame(stack []*jsonFrame) []*jsonFrame {
	stack = stack[:len(stack)-1]
	if len(stack) > 0 {
		valueDone(stack[len(stack)-1])
	}
	return stack
}

// valueDone records that a member value or array element ended in top.
func valueDone(top *jsonFrame) {
	if top == nil {
		return
	}
	if top.obj {
		top.expectKey = true
	} else {
		top.index++
	}
}

// memberError is checkJSON's verdict on an event's JSON as a field error:
// field names where raw sits in the event ("event" for a structured event,
// "data" for a binary-mode body), depth is the nesting allowed there. Syntax
// errors give nil: the decoders that follow word them better.
func memberError(raw []byte, field string, depth int) error {
	err := checkJSON(raw, depth)
	switch {
	case errors.Is(err, errTooDeep):
		return &events.FieldError{Field: "data", Reason: fmt.Sprintf("nested deeper than %d levels", events.MaxDepth)}
	case errors.Is(err, errDuplicateMember):
		return &events.FieldError{Field: field, Reason: err.Error() + " (each member name may appear once per object)"}
	}
	return nil
}
