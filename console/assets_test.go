package console

import (
	"io/fs"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func TestAssetsServed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path     string
		wantType string
		wantIn   string
	}{
		{"/console/", "text/html; charset=utf-8", "<title>Tollgate console</title>"},
		{"/console/assets/app.js", "text/javascript; charset=utf-8", "import * as finance from './finance.js';"},
		{"/console/assets/dom.js", "text/javascript; charset=utf-8", "export function h("},
		{"/console/assets/finance.js", "text/javascript; charset=utf-8", "['Reasoning', 'reasoning_tokens', fmtInt]"},
		{"/console/assets/app.css", "text/css; charset=utf-8", ":focus-visible"},
	}
	tc := newTestConsole(t)
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res := tc.do(t, get(tt.path, nil))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			if got := res.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			for h, want := range map[string]string{
				"X-Content-Type-Options":  "nosniff",
				"X-Frame-Options":         "DENY",
				"Content-Security-Policy": contentSecurityPolicy,
			} {
				if got := res.Header.Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
			if body := readBody(t, res); !strings.Contains(body, tt.wantIn) {
				t.Errorf("body does not contain %q", tt.wantIn)
			}
		})
	}
}

func TestAssetsRevalidateByETag(t *testing.T) {
	t.Parallel()
	tc := newTestConsole(t)
	first := tc.do(t, get("/console/assets/app.js", nil))
	etag := first.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	r := get("/console/assets/app.js", nil)
	r.Header.Set("If-None-Match", etag)
	if res := tc.do(t, r); res.StatusCode != http.StatusNotModified {
		t.Errorf("status %d, want 304", res.StatusCode)
	}
}

func TestConsolePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method     string
		path       string
		wantStatus int
	}{
		{http.MethodGet, "/console", http.StatusMovedPermanently},
		{http.MethodGet, "/console/assets/nope.js", http.StatusNotFound},
		{http.MethodGet, "/console/elsewhere", http.StatusNotFound},
		{http.MethodPut, "/console/session", http.StatusMethodNotAllowed},
		{http.MethodHead, "/console/", http.StatusOK},
	}
	tc := newTestConsole(t)
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			r := get(tt.path, nil)
			r.Method = tt.method
			if res := tc.do(t, r); res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
		})
	}
}

// The page must work with no network: it may not load anything from
// another host. The only absolute URL allowed is the SVG namespace name,
// which browsers never fetch.
func TestAssetsReferenceNoOtherHost(t *testing.T) {
	t.Parallel()
	allowed := []string{"http://www.w3.org/2000/svg"}
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s"'<>)]*`)
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range url.FindAllString(string(data), -1) {
			if !slices.Contains(allowed, m) {
				t.Errorf("%s refers to another host: %s", p, m)
			}
		}
		if bytesContainFold(data, "@import") {
			t.Errorf("%s imports a stylesheet", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func bytesContainFold(data []byte, s string) bool {
	return strings.Contains(strings.ToLower(string(data)), strings.ToLower(s))
}

func parseIndex(t *testing.T) *html.Node {
	t.Helper()
	data, err := assetFS.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(data)))
	if err != nil {
		t.Fatalf("parse index.html: %v", err)
	}
	return doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

// Every form control has a label: a <label for>, an enclosing <label>, or
// an aria-label(ledby).
func TestEveryInputHasALabel(t *testing.T) {
	t.Parallel()
	doc := parseIndex(t)
	labelFor := map[string]bool{}
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "label" {
			if f, ok := attr(n, "for"); ok {
				labelFor[f] = true
			}
		}
	})
	controls := 0
	var check func(n *html.Node, inLabel bool)
	check = func(n *html.Node, inLabel bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "label":
				inLabel = true
			case "input", "select", "textarea":
				typ, _ := attr(n, "type")
				if typ == "hidden" || typ == "submit" || typ == "button" || typ == "reset" {
					break
				}
				controls++
				id, _ := attr(n, "id")
				_, aria := attr(n, "aria-label")
				_, ariaBy := attr(n, "aria-labelledby")
				if !(labelFor[id] && id != "") && !inLabel && !aria && !ariaBy {
					t.Errorf("<%s id=%q> has no label", n.Data, id)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			check(c, inLabel)
		}
	}
	check(doc, false)
	if controls < 10 {
		t.Errorf("found %d form controls; the page has more than that, so the parse went wrong", controls)
	}
}

// Tables are semantic: a caption or a labelled region around them, and
// header cells with a scope.
func TestStaticTablesAreSemantic(t *testing.T) {
	t.Parallel()
	doc := parseIndex(t)
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "th" {
			if _, ok := attr(n, "scope"); !ok {
				t.Errorf("<th> without scope: %q", textOf(n))
			}
		}
	})
}

func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return strings.TrimSpace(b.String())
}

// The script finds its elements by id; a typo would only show in a
// browser, so check here that every id it asks for exists, once.
func TestScriptIDsExistInPage(t *testing.T) {
	t.Parallel()
	doc := parseIndex(t)
	ids := map[string]int{}
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode {
			if id, ok := attr(n, "id"); ok {
				ids[id]++
			}
		}
	})
	for id, n := range ids {
		if n > 1 {
			t.Errorf("id %q is used %d times", id, n)
		}
	}
	scripts, err := fs.Glob(assetFS, "assets/*.js")
	if err != nil {
		t.Fatal(err)
	}
	var js []byte
	for _, p := range scripts {
		b, err := assetFS.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		js = append(js, b...)
	}
	used := regexp.MustCompile(`\$\('([A-Za-z0-9_-]+)'\)`).FindAllStringSubmatch(string(js), -1)
	if len(used) < 20 {
		t.Fatalf("found %d $('id') uses in the scripts; the pattern is wrong", len(used))
	}
	for _, m := range used {
		if ids[m[1]] == 0 {
			t.Errorf("the script uses $('%s'), which index.html does not have", m[1])
		}
	}
	// Views the router shows are sections named view-{name}.
	for _, v := range []string{"signin", "none", "loading", "support", "tasks", "task", "finance", "ops", "audit"} {
		if ids["view-"+v] == 0 {
			t.Errorf("index.html has no section view-%s", v)
		}
	}
}

// The page loads only its own files: no inline script for the CSP to
// refuse, and no handler attributes.
func TestIndexHasNoInlineScript(t *testing.T) {
	t.Parallel()
	doc := parseIndex(t)
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if n.Data == "script" {
			if src, _ := attr(n, "src"); !strings.HasPrefix(src, "/console/assets/") {
				t.Errorf("script not from /console/assets/: %q", src)
			}
			if n.FirstChild != nil {
				t.Error("inline script in index.html")
			}
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") || a.Key == "style" {
				t.Errorf("<%s %s=...>: inline handlers and styles are refused by the CSP", n.Data, a.Key)
			}
		}
	})
}

// The scripts are ES modules; an import of a file that is not embedded
// would stop the whole page from loading.
func TestScriptImportsAreEmbedded(t *testing.T) {
	t.Parallel()
	scripts, err := fs.Glob(assetFS, "assets/*.js")
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?m)^import .* from '([^']+)';$`)
	n := 0
	for _, p := range scripts {
		b, err := assetFS.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imports.FindAllStringSubmatch(string(b), -1) {
			n++
			name, ok := strings.CutPrefix(m[1], "./")
			if !ok || strings.Contains(name, "/") {
				t.Errorf("%s imports %q: only ./file.js beside it is served", p, m[1])
				continue
			}
			if _, err := fs.Stat(assetFS, "assets/"+name); err != nil {
				t.Errorf("%s imports %q, which is not embedded", p, m[1])
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d imports; the pattern is wrong", n)
	}
}
