// Package config loads a service's settings struct from an environment given
// as KEY=value pairs, so tests pass their own environment instead of mutating
// the process's.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Load parses environ (os.Environ() form) into a new T using its env tags
// and defaults. Errors name the offending variable.
func Load[T any](environ []string) (T, error) {
	var cfg T
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	err := env.ParseWithOptions(&cfg, env.Options{Environment: m})
	if err == nil {
		return cfg, nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return cfg, fmt.Errorf("invalid configuration: %w", err)
	}
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			key := envKey(reflect.TypeFor[T](), pe.Name)
			msgs = append(msgs, fmt.Sprintf("%s: %s", key, want(pe, m[key])))
		} else {
			msgs = append(msgs, e.Error())
		}
	}
	return cfg, fmt.Errorf("invalid configuration: %s", strings.Join(msgs, "; "))
}

// want says what a variable that did not parse should hold.
func want(pe env.ParseError, got string) string {
	t := pe.Type
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return fmt.Sprintf("want a duration such as 500ms, 30s or 5m, got %q", got)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return fmt.Sprintf("want a whole number, got %q", got)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return fmt.Sprintf("want a whole number of 0 or more, got %q", got)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return fmt.Sprintf("want a number, got %q", got)
	case t.Kind() == reflect.Bool:
		return fmt.Sprintf("want true or false, got %q", got)
	}
	return pe.Err.Error()
}

// envKey finds the env tag of the struct field called field, looking into
// nested structs; env's parse errors carry only the Go field name.
func envKey(t reflect.Type, field string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == field {
			if k, _, _ := strings.Cut(f.Tag.Get("env"), ","); k != "" {
				return k
			}
		}
		if f.Type.Kind() == reflect.Struct {
			if k := envKey(f.Type, field); k != field {
				return k
			}
		}
	}
	return field
}

// List splits a comma-separated setting, trimming blanks and dropping empty
// entries.
func List(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
