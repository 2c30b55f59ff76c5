package redact

import (
	"regexp"
	"strings"
)

// span is a half-open byte range [start, end) of a text.
type span struct{ start, end int }

// rule is one detector. find returns the non-overlapping spans to replace,
// in order; it must be a pure function of text, so that a piece of text
// redacts the same way wherever it appears.
type rule struct {
	name string // what it detects, e.g. "jwt"; for tests and messages
	kind string // placeholder type
	// find adds to *steps the bytes it reads (a window read by a regexp
	// counts in full), so tests can show the work is linear in the text.
	find func(text string, steps *int) []span
	norm func(match string) string // the value equal matches share; nil: the match itself
}

// builtinRules returns the built-in rules in priority order: credentials
// first, because a key embedded in something that looks like a phone number
// or an e-mail address must disappear whole; then JWTs; then IBAN before
// card, because an IBAN's digits could pass Luhn; then e-mail addresses,
// then phone numbers, whose loose shape must not split anything above.
func builtinRules() []rule {
	rules := secretRules()
	return append(rules,
		rule{name: "iban", kind: KindIBAN, find: findIBANs, norm: compactUpper},
		rule{name: "card", kind: KindCard, find: findCards, norm: digitsOnly},
		rule{name: "email", kind: KindEmail, find: findEmails, norm: strings.ToLower},
		phoneRule(),
	)
}

// A hint returns the first index at or after from where a match could
// start, or -1. It is a cheap filter: an anchored rule tries its regexp
// only there, so no regexp ever scans text that cannot match.
type hint func(text string, from int) int

// accept checks a match in the context of the whole text (a regexp applied
// to a suffix cannot see what precedes it) and returns the span to replace.
// m holds submatch indexes into text.
type accept func(text string, m []int) (span, bool)

// anchored is a rule made of a hint and a regexp anchored where it points.
type anchored struct {
	name, kind string
	pattern    string
	// window, if not nil, returns where the text the regexp sees from a
	// hinted position at ends; it must lie beyond the end of any match
	// starting at at. Go's backtracking matcher, used for short inputs,
	// clears memory in proportion to its input, so a regexp tried at many
	// positions must see only what it can match.
	window func(text string, at int) int
	next   hint
	accept accept
	// resume returns where to look next after the candidate at at was
	// rejected; nil means at+1, so that a rejected candidate cannot hide a
	// valid match that starts inside it. Rules whose candidates inside a
	// rejected one must fail too skip past it, which keeps a text made of
	// nothing but near-misses linear.
	resume func(text string, at int) int
}

// rule compiles a. Go's regexps run in linear time in what they read.
func (a anchored) rule() rule {
	re := regexp.MustCompile(`^(?:` + a.pattern + `)`)
	return rule{name: a.name, kind: a.kind, find: func(text string, steps *int) []span {
		*steps += len(text)
		var out []span
		for pos := 0; pos < len(text); {
			at := a.next(text, pos)
			if at < 0 {
				break
			}
			end := len(text)
			if a.window != nil {
				end = min(end, a.window(text, at))
			}
			*steps += end - at
			if m := re.FindStringSubmatchIndex(text[at:end]); m != nil {
				for k := range m {
					if m[k] >= 0 {
						m[k] += at
					}
				}
				if sp, ok := a.accept(text, m); ok && sp.end > sp.start {
					out = append(out, sp)
					pos = sp.end
					continue
				}
			}
			pos = at + 1
			if a.resume != nil {
				pos = max(pos, a.resume(text, at))
			}
		}
		return out
	}}
}

// prefix hints at the earliest occurrence of any of lits that starts a word.
// It looks for their longest common prefix, so that the whole text is read
// once however many candidates it holds.
func prefix(lits ...string) hint {
	common := lits[0]
	for _, lit := range lits[1:] {
		for !strings.HasPrefix(lit, common) {
			common = common[:len(common)-1]
		}
	}
	return func(text string, from int) int {
		for {
			i := indexFrom(text, common, from)
			if i < 0 {
				return -1
			}
			if wordStart(text, i) {
				for _, lit := range lits {
					if strings.HasPrefix(text[i:], lit) {
						return i
					}
				}
			}
			from = i + 1
		}
	}
}

func indexFrom(text, lit string, from int) int {
	if i := strings.Index(text[from:], lit); i >= 0 {
		return from + i
	}
	return -1
}

// upTo is a window of at most n bytes.
func upTo(n int) func(text string, at int) int {
	return func(_ string, at int) int { return at + n }
}

// runWindow is a window over a prefix, the run of bytes in set after it,
// and one more byte for the regexp to look at.
func runWindow(prefixLen int, set func(byte) bool) func(text string, at int) int {
	return func(text string, at int) int { return runEnd(text, at+prefixLen, set) + 1 }
}

// skipRun resumes after the run of bytes in set that follows a prefix: any
// candidate starting inside that run has a body that is a suffix of the
// rejected one, so it is rejected too.
func skipRun(prefixLen int, set func(byte) bool) func(text string, at int) int {
	return func(text string, at int) int { return runEnd(text, at+prefixLen, set) }
}

// runEnd returns the end of the run of bytes in set that starts at i.
func runEnd(text string, i int, set func(byte) bool) int {
	i = min(i, len(text))
	for i < len(text) && set(text[i]) {
		i++
	}
	return i
}

// foldLiteral hints at lower, compared ignoring ASCII case.
func foldLiteral(lower string) hint {
	first := string([]byte{lower[0], lower[0] - ('a' - 'A')})
	return func(text string, from int) int {
		for from < len(text) {
			i := strings.IndexAny(text[from:], first)
			if i < 0 {
				return -1
			}
			i += from
			if i+len(lower) <= len(text) && equalFoldASCII(text[i:i+len(lower)], lower) {
				return i
			}
			from = i + 1
		}
		return -1
	}
}

func equalFoldASCII(s, lower string) bool {
	for i := range len(lower) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// wordStart reports whether a word begins at i: the byte before it, if any,
// is not a letter or digit. '_' and '-' count as boundaries, so keys glued
// to a name (MY_TOKEN_tg_…, --key-sk-…) are found; inside a longer base64url
// run a prefix plus a long random body is too unlikely to matter.
func wordStart(text string, i int) bool {
	return i == 0 || !isAlnum(text[i-1])
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool  { return 'a' <= c && c <= 'z' }
func isLetter(c byte) bool { return isUpper(c) || isLower(c) }
func isAlnum(c byte) bool  { return isDigit(c) || isLetter(c) }

func digitsOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && isDigit(byte(r)) {
			return r
		}
		return -1
	}, s)
}

// atLeastDigits reports whether s holds at least n ASCII digits.
func atLeastDigits(s string, n int) bool {
	for i := 0; i < len(s) && n > 0; i++ {
		if isDigit(s[i]) {
			n--
		}
	}
	return n <= 0
}
