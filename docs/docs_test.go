// Package docs holds freqcap's documentation; its test compiles every Go
// snippet of README.md and docs/*.md, so that none of them rots.
package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock is a fenced Go block of a Markdown file.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// Every Go snippet is a whole program that builds against this module
// (go build with an overlay: nothing is written into the tree).
func TestGoSnippetsCompile(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	replace := map[string]string{}
	var pkgs []string
	var where []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range goBlock.FindAllSubmatch(b, -1) {
			src := string(m[1])
			at := f + " snippet " + string(rune('1'+i))
			if !strings.HasPrefix(src, "package ") {
				t.Errorf("%s is not a whole program (package ..., imports, func main): readers copy it", at)
				continue
			}
			n := len(pkgs)
			file := filepath.Join(tmp, "snippet.go"+string(rune('a'+n)))
			if err := os.WriteFile(file, m[1], 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("docs", "snippet-"+string(rune('a'+n)))
			replace[filepath.Join(root, dir, "main.go")] = file
			pkgs = append(pkgs, "./"+dir)
			where = append(where, at)
		}
	}
	if len(pkgs) < 5 {
		t.Fatalf("found %d Go snippets: the pattern is wrong", len(pkgs))
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, p := range pkgs {
		cmd := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, p)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not build: %v\n%s", where[i], err, out)
		}
	}
}

// mdLink is a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is a Markdown heading line.
var heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces as dashes.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of README, CHANGELOG and docs/ reaches a file that
// exists, and a heading of it when it names one.
func TestLinksResolve(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../CHANGELOG.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
			}
			body, err := os.ReadFile(file)
			if err != nil {
				if info, serr := os.Stat(file); serr == nil && info.IsDir() {
					continue
				}
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor == "" {
				continue
			}
			found := false
			for _, h := range heading.FindAllStringSubmatch(string(body), -1) {
				found = found || slug(h[1]) == anchor
			}
			if !found {
				t.Errorf("%s links to %s, which has no heading #%s", f, target, anchor)
			}
		}
	}
}
