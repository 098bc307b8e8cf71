// Package envconf derives what a service configuration needs from the one
// place its settings are declared: the struct tags envconfig reads
// (`envconfig`, `default`, `desc`) plus `secret:"true"` on secrets.
//
//   - Defaults fills a Config built as a literal (tests, the in-process
//     stack) with the same defaults envconfig gives one read from the
//     environment, so a default is written once, in its tag.
//   - LogValue logs every tagged field under its variable's name, secrets
//     masked, so a field added to a Config is logged without a second edit.
//
// Numbers with a default are defaulted when zero or negative (a negative
// count or duration is never meant), unless tagged `negative:"ok"`, where a
// negative value has a meaning of its own (e.g. "never").
package envconf

import (
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var durationType = reflect.TypeFor[time.Duration]()

// Defaults sets every unset field of the struct cfg points to (and of its
// nested and embedded structs) from its `default` tag. It panics on a
// default that does not parse: a programming error a test finds.
func Defaults(cfg any) {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("envconf.Defaults needs a pointer to a struct")
	}
	defaults(v.Elem())
}

func defaults(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			defaults(fv)
			continue
		}
		def, ok := f.Tag.Lookup("default")
		if !ok || !unset(fv, f.Tag.Get("negative") == "ok") {
			continue
		}
		if err := set(fv, def); err != nil {
			panic(fmt.Sprintf("envconf: default %q of %s.%s: %v", def, t.Name(), f.Name, err))
		}
	}
}

func unset(v reflect.Value, negativeOK bool) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0 || (!negativeOK && v.Int() < 0)
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0 || (!negativeOK && v.Float() < 0)
	default:
		return v.IsZero()
	}
}

func set(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		v.SetInt(int64(d))
		return err
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		v.SetBool(b)
		return err
	case v.CanInt():
		n, err := strconv.ParseInt(s, 0, v.Type().Bits())
		v.SetInt(n)
		return err
	case v.CanUint():
		n, err := strconv.ParseUint(s, 0, v.Type().Bits())
		v.SetUint(n)
		return err
	case v.CanFloat():
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		v.SetFloat(f)
		return err
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// LogValue is the log value of a configuration struct: every field with an
// envconfig tag under its variable's name in lower case (LLM_MODEL →
// llm_model), secrets (`secret:"true"`) as "***" when set; a nested or
// embedded struct that is a slog.LogValuer logs as a group of its own
// (groupName), any other is flattened.
func LogValue(cfg any) slog.Value {
	return slog.GroupValue(attrs(reflect.ValueOf(cfg))...)
}

func attrs(v reflect.Value) []slog.Attr {
	var out []slog.Attr
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		name := strings.ToLower(f.Tag.Get("envconfig"))
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			if lv, ok := fv.Interface().(slog.LogValuer); ok {
				out = append(out, slog.Any(groupName(f.Name), lv))
				continue
			}
			out = append(out, attrs(fv)...)
			continue
		}
		if name == "" {
			continue
		}
		if f.Tag.Get("secret") == "true" {
			out = append(out, slog.String(name, mask(fv)))
			continue
		}
		out = append(out, slog.Any(name, fv.Interface()))
	}
	return out
}

// groupName names a nested configuration in logs: its field name without
// "Config", in lower case (NATS → nats, LLMConfig → llm).
func groupName(field string) string {
	if n := strings.TrimSuffix(field, "Config"); n != "" {
		return strings.ToLower(n)
	}
	return strings.ToLower(field)
}

func mask(v reflect.Value) string {
	if v.IsZero() {
		return ""
	}
	return "***"
}
