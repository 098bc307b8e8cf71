package ingestsvc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/recallhq/recall/pkg/events"
)

// Errors of checkJSON.
var (
	errDuplicateMember = errors.New("duplicate member name")
	errTooDeep         = errors.New("nested too deep")
	errJSONSyntax      = errors.New("invalid JSON")
)

// checkJSON reports whether no object of the JSON text data repeats a
// member name, at any depth. JSON parsers disagree on which duplicate wins
// (the first, the last, an error), so a stored event with one would mean
// different things to different readers; it is rejected instead, naming the
// member and its path: `duplicate member name "id" in $`. Names are compared
// after unescaping ("a" and "\u0061" are the same name).
//
// Nesting deeper than maxDepth is an error wrapping errTooDeep. checkJSON
// is a single pass that allocates little; it does not fully validate the
// syntax: malformed text is an error wrapping errJSONSyntax when it gets in
// the way, and callers still decode (or json.Valid) what they accept.
func checkJSON(data []byte, maxDepth int) error {
	s := &dupScanner{b: data, max: maxDepth}
	s.ws()
	if err := s.value(); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return fmt.Errorf("%w: data after the value at byte %d", errJSONSyntax, s.i)
	}
	return nil
}

// dupScanner is checkJSON's state: the text, the read position, and the
// path of the value being read (for error messages).
type dupScanner struct {
	b     []byte
	i     int
	depth int
	max   int
	path  []pathElem
}

// pathElem is one step of a path: a member name, or an array index when
// name is nil.
type pathElem struct {
	name  []byte
	index int
}

func (s *dupScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *dupScanner) syntax() error {
	return fmt.Errorf("%w at byte %d", errJSONSyntax, s.i)
}

// value reads one value starting at s.i.
func (s *dupScanner) value() error {
	if s.i >= len(s.b) {
		return s.syntax()
	}
	switch s.b[s.i] {
	case '{':
		return s.nested(s.object)
	case '[':
		return s.nested(s.array)
	case '"':
		_, _, err := s.str()
		return err
	}
	for s.i < len(s.b) { // number, true, false, null
		switch s.b[s.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return nil
		}
		s.i++
	}
	return nil
}

func (s *dupScanner) nested(read func() error) error {
	if s.depth == s.max {
		return fmt.Errorf("%w: more than %d levels", errTooDeep, s.max)
	}
	s.depth++
	s.i++ // the opening bracket
	err := read()
	s.depth--
	return err
}

// str reads a string; raw is its content between the quotes, escaped
// whether it holds a backslash.
func (s *dupScanner) str() (raw []byte, escaped bool, err error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], escaped, nil
		}
	}
	s.i = len(s.b)
	return nil, false, s.syntax()
}

// object reads members up to the closing brace; names are compared in a
// small slice, or a map once the object has many.
func (s *dupScanner) object() error {
	var names nameSet // on the stack: an object costs no allocation until it has many members
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' && first {
			s.i++
			return nil
		}
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.syntax()
		}
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		name := raw
		if escaped {
			var u string
			if json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &u) != nil {
				return s.syntax()
			}
			name = []byte(u)
		}
		if dup := names.add(name); dup {
			return fmt.Errorf("%w %q in %s", errDuplicateMember, name, s.where())
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax()
		}
		s.i++
		s.ws()
		s.path = append(s.path, pathElem{name: name})
		err = s.value()
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		if done, err := s.next('}'); done || err != nil {
			return err
		}
	}
}

// nameSet is the member names of one object: compared in a small array,
// or in a map once the object has more than its size.
type nameSet struct {
	few  [16][]byte
	n    int
	many map[string]struct{}
}

// add records name and reports whether it was there already.
func (ns *nameSet) add(name []byte) bool {
	if ns.many != nil {
		if _, ok := ns.many[string(name)]; ok {
			return true
		}
		ns.many[string(name)] = struct{}{}
		return false
	}
	for _, n := range ns.few[:ns.n] {
		if bytes.Equal(n, name) {
			return true
		}
	}
	if ns.n < len(ns.few) {
		ns.few[ns.n] = name
		ns.n++
		return false
	}
	ns.many = make(map[string]struct{}, 2*len(ns.few))
	for _, n := range ns.few {
		ns.many[string(n)] = struct{}{}
	}
	ns.many[string(name)] = struct{}{}
	return false
}

func (s *dupScanner) array() error {
	for n := 0; ; n++ {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' && n == 0 {
			s.i++
			return nil
		}
		s.path = append(s.path, pathElem{index: n})
		err := s.value()
		s.path = s.path[:len(s.path)-1]
		if err != nil {
			return err
		}
		if done, err := s.next(']'); done || err != nil {
			return err
		}
	}
}

// next reads the ',' between elements or the closing bracket.
func (s *dupScanner) next(closing byte) (done bool, err error) {
	s.ws()
	switch {
	case s.i < len(s.b) && s.b[s.i] == ',':
		s.i++
		return false, nil
	case s.i < len(s.b) && s.b[s.i] == closing:
		s.i++
		return true, nil
	}
	return false, s.syntax()
}

// where is the path of the object being read, e.g. "$.data.content[0]".
func (s *dupScanner) where() string {
	var b bytes.Buffer
	b.WriteByte('$')
	for _, p := range s.path {
		if p.name != nil {
			b.WriteByte('.')
			b.Write(p.name)
		} else {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		}
	}
	return b.String()
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
