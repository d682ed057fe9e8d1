// Package config loads a service's settings struct from an environment given
// as KEY=value pairs, so tests pass their own environment instead of mutating
// the process's.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

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
			msgs = append(msgs, fmt.Sprintf("%s: %v", envKey(reflect.TypeFor[T](), pe.Name), pe.Err))
		} else {
			msgs = append(msgs, e.Error())
		}
	}
	return cfg, fmt.Errorf("invalid configuration: %s", strings.Join(msgs, "; "))
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
