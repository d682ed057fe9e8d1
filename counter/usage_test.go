package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/config"
)

// --help lists every variable with its default, and README's table says
// the same; --version names the build.
func TestHelpAndVersionAgreeWithREADME(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := config.Documented(string(readme), "counter")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range config.Vars[Config]() {
		if !strings.Contains(out.String(), v.Name) || v.Help == "" {
			t.Errorf("--help lacks %s or its meaning", v.Name)
		}
		def, ok := doc[v.Name]
		switch {
		case !ok:
			t.Errorf("README's counter table lacks %s", v.Name)
		case def != v.Default:
			t.Errorf("README says %s defaults to %q, the code %q", v.Name, def, v.Default)
		}
		delete(doc, v.Name)
	}
	delete(doc, "GOGC")       // Go's own, set by main when unset
	delete(doc, "GOMEMLIMIT") // likewise
	for name := range doc {
		t.Errorf("README's counter table lists %s, which the counter does not read", name)
	}

	out.Reset()
	if err := run(context.Background(), []string{"--version"}, nil, &out); err != nil || !strings.HasPrefix(out.String(), "counter ") {
		t.Errorf("--version: %q, %v", out.String(), err)
	}
	if err := run(context.Background(), []string{"--port=1"}, nil, &out); err == nil || !strings.Contains(err.Error(), "--help") {
		t.Errorf("an unknown argument: %v, want an error pointing at --help", err)
	}
}
