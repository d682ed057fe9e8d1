package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/config"
)

// --help lists every variable with its default, and docs/configuration.md
// says the same; --version names the build.
func TestHelpAndVersionAgreeWithTheDocs(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := config.Disagreements[Config](string(readme), "callback", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}

	out.Reset()
	if err := run(context.Background(), []string{"--version"}, nil, &out); err != nil || !strings.HasPrefix(out.String(), "callback ") {
		t.Errorf("--version: %q, %v", out.String(), err)
	}
	if err := run(context.Background(), []string{"--port=1"}, nil, &out); err == nil || !strings.Contains(err.Error(), "--help") {
		t.Errorf("an unknown argument: %v, want an error pointing at --help", err)
	}
}
