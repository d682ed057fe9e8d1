// Package config loads a service's settings struct from an environment given
// as KEY=value pairs, so tests pass their own environment instead of mutating
// the process's.
package config

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
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

// Var is one environment variable of a settings struct.
type Var struct {
	Name, Default, Help string
}

// Vars lists T's variables in field order, nested structs included.
func Vars[T any]() []Var { return vars(reflect.TypeFor[T]()) }

func vars(t reflect.Type) []Var {
	var out []Var
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			out = append(out, Var{Name: name, Default: f.Tag.Get("envDefault"), Help: f.Tag.Get("help")})
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, vars(f.Type)...)
		}
	}
	return out
}

// Usage writes what --help shows: every variable of T with its default.
func Usage[T any](w io.Writer, service, about string) {
	fmt.Fprintf(w, "%s: %s\n\nUsage: %s [--help | --version]\n\nSettings are environment variables:\n\n", service, about, service)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range Vars[T]() {
		def := v.Default
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Help)
	}
	tw.Flush()
}

// Args handles a service's command line: --help (or -h) writes usage,
// --version the version line; both report done. Settings are environment
// variables only, so anything else is an error.
func Args(args []string, w io.Writer, usage func(io.Writer), version string) (done bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(w)
		return true, nil
	case "-version", "--version", "version":
		fmt.Fprintln(w, version)
		return true, nil
	}
	return false, fmt.Errorf("unknown argument %q: settings are environment variables (--help lists them)", args[0])
}

// Documented reads the variables and defaults a document (docs/configuration.md) lists for one
// service: the table after the line "<service>:" of its Configuration
// section, rows "| `NAME` | `default` | meaning |" (several names and
// defaults may share a row, joined by " / "; "(none)" is no default).
func Documented(readme, service string) (map[string]string, error) {
	_, after, ok := strings.Cut(readme, "\n"+service+":\n")
	if !ok {
		return nil, fmt.Errorf("the configuration document has no %q table", service+":")
	}
	out := map[string]string{}
	started := false
	for line := range strings.SplitSeq(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 || !strings.Contains(cells[0], "`") {
			continue
		}
		names := strings.Split(cells[0], " / ")
		defs := strings.Split(cells[1], " / ")
		for i, n := range names {
			def := ""
			if i < len(defs) {
				def = strings.Trim(strings.TrimSpace(defs[i]), "`")
			}
			if def == "(none)" {
				def = ""
			}
			out[strings.Trim(strings.TrimSpace(n), "`")] = def
		}
	}
	return out, nil
}

// Disagreements compares T's variables with the configuration document's table for service
// (see Documented) and the --help text usage: each variable must be in
// both with its default and a meaning, and the table must list nothing T
// does not read (but the names in others, such as Go's own GOGC).
func Disagreements[T any](readme, service, usage string, others ...string) ([]string, error) {
	doc, err := Documented(readme, service)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range Vars[T]() {
		if !strings.Contains(usage, v.Name) || v.Help == "" {
			out = append(out, fmt.Sprintf("--help lacks %s or its meaning", v.Name))
		}
		def, ok := doc[v.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("docs/configuration.md's %s table lacks %s", service, v.Name))
		case def != v.Default:
			out = append(out, fmt.Sprintf("docs/configuration.md says %s defaults to %q, the code %q", v.Name, def, v.Default))
		}
		delete(doc, v.Name)
	}
	for _, name := range others {
		delete(doc, name)
	}
	for name := range doc {
		out = append(out, fmt.Sprintf("docs/configuration.md's %s table lists %s, which %s does not read", service, name, service))
	}
	return out, nil
}
