package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// documents are the Markdown files whose links are checked, relative to
// this directory.
func documents(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, "../README.md", "../deploy/README.md")
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile("(?m)^#{1,6} +(.+?) *$")
	fenceRE   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than hyphens and underscores dropped, spaces turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of the headings of the Markdown file at
// path, duplicates numbered as GitHub numbers them.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := fenceRE.ReplaceAllString(string(b), "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Every relative link names a file that exists and, with a fragment, a
// heading of that file.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s: no such file", doc, target)
				continue
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s links to %s: a fragment into a file that is not Markdown", doc, target)
				continue
			}
			if !anchors(t, file)[frag] {
				t.Errorf("%s links to %s: %s has no such heading", doc, target, file)
			}
		}
	}
}

// unstableHeading matches what makes a heading change with the next run
// or the next commit: a date, a time, a commit, a session.
var unstableHeading = regexp.MustCompile("(?i)\\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\\b|\\b[0-9]{2}:[0-9]{2}\\b|`[0-9a-f]{7,40}`|\\b(session|today|latest run|last run)\\b")

// Headings are stable: links point at them, so none names a date, a
// commit or a session.
func TestHeadingsAreStable(t *testing.T) {
	t.Parallel()
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
			if unstableHeading.MatchString(m[1]) {
				t.Errorf("%s: heading %q names a date, a commit or a session", doc, m[1])
			}
		}
	}
}
