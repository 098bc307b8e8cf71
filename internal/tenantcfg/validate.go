package tenantcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// ErrInvalid is wrapped by every *InvalidError.
var ErrInvalid = errors.New("invalid tenant configuration")

// InvalidError lists every invalid field of a configuration.
type InvalidError struct {
	Errors []events.ConfigFieldError
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		parts[i] = f.Field + ": " + f.Error
	}
	return ErrInvalid.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// invalid returns nil for no errors, else an *InvalidError.
func invalid(errs []events.ConfigFieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Errors: errs}
}

// Parse decodes a configuration document strictly and validates it: the
// one validator of tenant configurations, used by the HTTP and NATS API,
// `recall tenant validate` and the services watching RECALL_CONFIG. It
// reports every problem it finds, each with the JSON path of its field
// (unknown fields, wrong JSON types, then the checks of Validate); the
// error is an *InvalidError. It applies DefaultCeilings (Ceilings.Parse
// applies others).
func Parse(doc []byte) (events.TenantConfig, error) { return DefaultCeilings.Parse(doc) }

// parse is Parse without the checks of Validate.
func parse(doc []byte) (events.TenantConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return events.TenantConfig{}, invalid([]events.ConfigFieldError{{Field: "", Error: "not JSON: " + err.Error()}})
	}
	if dec.More() {
		return events.TenantConfig{}, invalid([]events.ConfigFieldError{{Field: "", Error: "trailing data after the JSON object"}})
	}
	if _, ok := v.(map[string]any); !ok {
		return events.TenantConfig{}, invalid([]events.ConfigFieldError{{Field: "", Error: "must be a JSON object"}})
	}
	var errs []events.ConfigFieldError
	checkShape(v, reflect.TypeFor[events.TenantConfig](), "", &errs)
	if len(errs) > 0 {
		return events.TenantConfig{}, invalid(errs)
	}
	var c events.TenantConfig
	strict := json.NewDecoder(bytes.NewReader(doc))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&c); err != nil {
		return events.TenantConfig{}, invalid([]events.ConfigFieldError{{Field: "", Error: err.Error()}})
	}
	return c, nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkShape compares a decoded JSON value with the Go type it must decode
// into, recording unknown members and values of the wrong JSON type.
func checkShape(v any, t reflect.Type, path string, errs *[]events.ConfigFieldError) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return // null leaves the field unset
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			*errs = append(*errs, events.ConfigFieldError{Field: path, Error: "invalid value: " + err.Error()})
		}
		return
	}
	bad := func(want string) {
		*errs = append(*errs, events.ConfigFieldError{Field: path, Error: "must be " + want})
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad("an object")
			return
		}
		checkMembers(m, t, path, errs)
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			bad("an array")
			return
		}
		for i, e := range a {
			checkShape(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			bad("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad("true or false")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(json.Number)
		if _, err := strconv.ParseInt(string(n), 10, 64); !ok || err != nil {
			bad("an integer")
		}
	}
}

// checkMembers checks an object's members against struct type t, in
// sorted order so the errors are stable.
func checkMembers(m map[string]any, t reflect.Type, path string, errs *[]events.ConfigFieldError) {
	fields := jsonFields(t)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			*errs = append(*errs, events.ConfigFieldError{Field: join(path, k), Error: "unknown field"})
			continue
		}
		checkShape(m[k], f.Type, join(path, k), errs)
	}
}

// jsonFields maps the JSON member names of struct type t to its fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Validate checks a decoded configuration's values and returns an
// *InvalidError listing every invalid field, or nil; the ceilings are
// DefaultCeilings (Ceilings.Validate applies others).
func Validate(c events.TenantConfig) error { return DefaultCeilings.Validate(c) }

// validate is Validate without the ceilings.
func validate(c events.TenantConfig) error {
	var errs []events.ConfigFieldError
	add := func(field, msg string) { errs = append(errs, events.ConfigFieldError{Field: field, Error: msg}) }
	for _, n := range []struct {
		field string
		v     int64
	}{
		{"minimum_message_tokens_to_init", c.MinimumMessageTokensToInit},
		{"minimum_tokens_between_update", c.MinimumTokensBetweenUpdate},
		{"tool_calls_between_updates", int64(c.ToolCallsBetweenUpdates)},
		{"min_new_user_messages", int64(c.MinNewUserMessages)},
		{"query_max_budget_tokens", c.QueryMaxBudgetTokens},
	} {
		if n.v < 0 {
			add(n.field, "must be ≥ 0")
		}
	}
	if r := c.Retention; r != nil {
		for _, d := range []struct{ field, v string }{{"session_max_age", r.SessionMaxAge}, {"notifications_max_age", r.NotificationsMaxAge}} {
			if _, _, err := (&events.Retention{SessionMaxAge: d.v}).Durations(); err != nil {
				add("retention."+d.field, fmt.Sprintf("must be a Go duration of at least 1m (e.g. \"720h\"), not %q", d.v))
			}
		}
	}
	errs = append(errs, checkContextManagement(c.ContextManagement)...)
	errs = append(errs, checkMemoryTypes(c)...)
	errs = append(errs, checkGateway(c.Gateway)...)
	return invalid(errs)
}

// checkContextManagement runs events.ContextManagement.Validate on each
// edit alone (so every edit's error is reported, at its path), then on
// the list (the order the API requires).
func checkContextManagement(cm *events.ContextManagement) []events.ConfigFieldError {
	if cm == nil {
		return nil
	}
	var errs []events.ConfigFieldError
	for i, e := range cm.Edits {
		err := (&events.ContextManagement{Edits: []events.ContextEdit{e}}).Validate()
		if err != nil {
			errs = append(errs, editError(fmt.Sprintf("context_management.edits[%d]", i), "edits[0]", err))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if err := cm.Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), events.ErrInvalidContextEdit.Error()+": ")
		at, _, _ := strings.Cut(msg, ":")
		return []events.ConfigFieldError{editError("context_management."+at, at, err)}
	}
	return nil
}

// editError splits a context-management error ("edits[0].keep must be …")
// into the field under base and the message.
func editError(base, at string, err error) events.ConfigFieldError {
	msg := strings.TrimPrefix(err.Error(), events.ErrInvalidContextEdit.Error()+": ")
	rest, ok := strings.CutPrefix(msg, at)
	if !ok {
		return events.ConfigFieldError{Field: base, Error: msg}
	}
	if sub, ok := strings.CutPrefix(rest, "."); ok {
		name, text, _ := strings.Cut(sub, " ")
		return events.ConfigFieldError{Field: base + "." + name, Error: text}
	}
	return events.ConfigFieldError{Field: base, Error: strings.TrimSpace(strings.TrimPrefix(rest, ":"))}
}

// checkMemoryTypes checks the custom memory types one by one and the
// default policy's types against the registry they make; the registry
// (CheckMemory) has the last word.
func checkMemoryTypes(c events.TenantConfig) []events.ConfigFieldError {
	var errs []events.ConfigFieldError
	add := func(field, msg string) { errs = append(errs, events.ConfigFieldError{Field: field, Error: msg}) }
	known := map[string]bool{}
	for _, t := range memory.BuiltinMemoryTypes {
		known[t.Name] = true
	}
	for i, t := range c.CustomMemoryTypes {
		at := fmt.Sprintf("custom_memory_types[%d]", i)
		switch err := events.ValidateID(t.Name); {
		case err != nil:
			add(at+".name", err.Error())
		case known[t.Name]:
			add(at+".name", fmt.Sprintf("%q is taken (a built-in type or an earlier custom type)", t.Name))
		}
		known[t.Name] = true
		if strings.TrimSpace(t.Prompt) == "" {
			add(at+".prompt", "is required")
		}
	}
	if p := c.MemoryPolicy; p != nil && len(errs) == 0 {
		for i, name := range p.MemoryTypes {
			if !known[name] {
				add(fmt.Sprintf("memory_policy.memory_types[%d]", i), fmt.Sprintf("unknown memory type %q", name))
			}
		}
	}
	if len(errs) == 0 {
		if err := CheckMemory(c); err != nil {
			add("custom_memory_types", err.Error())
		}
	}
	return errs
}
