package docs

import (
	"os"
	"regexp"
	"testing"
)

var (
	// bannerKeyRE is the line of make run's banner that exports the key
	// it created.
	bannerKeyRE = regexp.MustCompile(`(?m)^export (\w+)=\$key$`)
	// exportedKeyRE is a key a document creates and exports itself
	// (SUPPORT_KEY=$(bin/tollgate keys create ...)).
	exportedKeyRE = regexp.MustCompile(`(?m)^export (\w+_KEY)=`)
)

// The client key make run prints is read under the one name its banner
// exports, by every curl command and every SDK snippet: a reader who
// pastes the banner and then a snippet must not meet "Missing
// credentials".
func TestDocumentsReadTheKeyTheBannerExports(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/run-demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := bannerKeyRE.FindSubmatch(script)
	if m == nil {
		t.Fatalf("scripts/run-demo.sh's banner exports no key (no line matching %s)", bannerKeyRE)
	}
	banner := string(m[1])
	docs := map[string]string{}
	others := map[string]bool{} // keys the documents create themselves
	for _, path := range documents(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[path] = string(b)
		for _, e := range exportedKeyRE.FindAllStringSubmatch(string(b), -1) {
			others[e[1]] = true
		}
	}
	reads := []struct {
		what string
		re   *regexp.Regexp
		ok   func(name string) bool
	}{
		{"a curl's bearer", regexp.MustCompile(`Bearer \$\{?(\w+)`), func(n string) bool { return n == banner || others[n] }},
		{"the Python SDK's api_key", regexp.MustCompile(`api_key=os\.environ\["(\w+)"\]`), func(n string) bool { return n == banner }},
		{"the Node SDK's apiKey", regexp.MustCompile(`apiKey: process\.env\.(\w+)`), func(n string) bool { return n == banner }},
		{"the Go SDK's WithAPIKey", regexp.MustCompile(`WithAPIKey\(os\.Getenv\("(\w+)"\)\)`), func(n string) bool { return n == banner }},
	}
	for path, text := range docs {
		for _, r := range reads {
			for _, got := range r.re.FindAllStringSubmatch(text, -1) {
				if !r.ok(got[1]) {
					t.Errorf("%s: %s reads %s; make run's banner exports %s", path, r.what, got[1], banner)
				}
			}
		}
	}
}
