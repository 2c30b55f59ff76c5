package catalog

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameLength bounds a model name, in bytes.
const maxNameLength = 200

// cloudflareNamespaces are the prefixes of Workers AI's own model names
// ("@cf/meta/llama-3.1-8b-instruct"): the one place a model name may start
// with '@'. After the prefix comes a path, never a formula.
var cloudflareNamespaces = []string{"@cf/", "@hf/"}

// CheckModelName returns an error saying what is wrong with name as a model
// name, nil when it may be one. Every name that enters the catalog goes
// through it: catalog models and their provider-side names, the default
// model, TOLLGATE_PRICES and every key of a price list.
//
// A name is 1-200 bytes of UTF-8 with no control or format characters
// (NUL, newlines, escape sequences, bidi overrides and zero-width marks
// would reach logs and the console raw, or make two names that look the
// same), and no leading or trailing space (TOLLGATE_PRICES trims it, so a
// name with one cannot be priced). It does not start with '=', '+', '-' or
// '@': a spreadsheet runs such a cell as a formula (CSV injection; usage
// exports quote them too, see internal/csvsafe), and no real model is
// named so, except Workers AI's "@cf/" and "@hf/" paths, which are allowed.
// The error never repeats the name: callers quote it with %q.
func CheckModelName(name string) error {
	switch {
	case name == "" || len(name) > maxNameLength:
		return errors.New("names must be 1-200 bytes")
	case !utf8.ValidString(name):
		return errors.New("names must be valid UTF-8")
	case strings.ContainsFunc(name, isHiddenRune):
		return errors.New("names may not hold control or format characters (NUL, newlines, tabs, bidi or zero-width marks)")
	case strings.TrimFunc(name, unicode.IsSpace) != name:
		return errors.New("names may not start or end with a space")
	case strings.ContainsRune("=+-@", rune(name[0])) && !hasCloudflareNamespace(name):
		return errors.New("names may not start with '=', '+', '-' or '@' (a spreadsheet runs them as formulas); only Workers AI's @cf/ and @hf/ paths start with '@'")
	}
	return nil
}

// isHiddenRune reports whether r is a control character (C0, DEL, C1) or
// a format character (Unicode Cf: bidi controls, zero-width space and
// joiners, the byte order mark).
func isHiddenRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// hasCloudflareNamespace reports whether name is a Workers AI path: one of
// its namespaces, then a letter or digit.
func hasCloudflareNamespace(name string) bool {
	for _, p := range cloudflareNamespaces {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			r, _ := utf8.DecodeRuneInString(rest)
			return unicode.IsLetter(r) || unicode.IsDigit(r)
		}
	}
	return false
}
