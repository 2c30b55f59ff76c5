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
	find func(text string) []span
	norm func(match string) string // the value equal matches share; nil: the match itself
}

// builtinRules returns the built-in rules in priority order: credentials
// first, because a key embedded in something that looks like a phone number
// or an e-mail address must disappear whole; then JWTs; then IBAN before
// card, because an IBAN's digits could pass Luhn; then e-mail addresses,
// then phone numbers, whose loose shape must not split anything above.
func builtinRules() []rule {
	return []rule{
		anchoredRule("private-key", KindSecret, 0,
			`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`,
			literal("-----BEGIN"), whole),
		// OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-).
		anchoredRule("openai-anthropic", KindSecret, 0, `sk-[A-Za-z0-9_-]{20,}`, literal("sk-"), vendorKey(len("sk-"))),
		anchoredRule("github", KindSecret, 0, `gh[pousr]_[A-Za-z0-9]{36,}`, literal("gh"), vendorKey(len("ghp_"))),
		anchoredRule("github-pat", KindSecret, 0, `github_pat_[A-Za-z0-9_]{22,}`, literal("github_pat_"), vendorKey(len("github_pat_"))),
		anchoredRule("aws-access-key-id", KindSecret, len("AKIA")+16+1, `A[KS]IA[A-Z0-9]{16}\b`, literal("AKIA", "ASIA"), vendorKey(len("AKIA"))),
		// The 40-character secret has no prefix of its own, so it needs its
		// label: aws_secret_access_key=…, "SecretAccessKey": "…".
		anchoredRule("aws-secret-access-key", KindSecret, 0,
			`(?i)secret[_ ]?(?:access[_ ]?)?key["']?[ \t]*[:=][ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)`,
			foldLiteral("secret"), group1),
		anchoredRule("slack", KindSecret, 0, `xox[baprs]-[A-Za-z0-9-]{10,}`, literal("xox"), vendorKey(len("xoxb-"))),
		// Tollgate's own keys: tg_ and 32 random bytes in base64url (43
		// characters). A longer run is redacted too.
		anchoredRule("tollgate", KindSecret, 0, `tg_[A-Za-z0-9_-]{43,}`, literal("tg_"), vendorKey(len("tg_"))),
		anchoredRule("bearer", KindSecret, 0, `(?i)bearer[ \t]+([A-Za-z0-9._~+/-]+=*)`, foldLiteral("bearer"), bearer),
		anchoredRule("jwt", KindSecret, 0, `eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`, literal("eyJ"), atWord),
		{name: "iban", kind: KindIBAN, find: findIBANs, norm: compactUpper},
		{name: "card", kind: KindCard, find: findCards, norm: digitsOnly},
		{name: "email", kind: KindEmail, find: findEmails, norm: strings.ToLower},
		phoneRule(),
	}
}

// A hint returns the first index at or after from where a match could
// start, or -1. It is a cheap filter: anchoredRule tries its regexp only
// there, so no regexp ever scans text that cannot match.
type hint func(text string, from int) int

// accept checks a match in the context of the whole text (a regexp applied
// to a suffix cannot see what precedes it) and returns the span to replace.
// m holds submatch indexes into text.
type accept func(text string, m []int) (span, bool)

// anchoredRule tries pattern, anchored, at each position next suggests. A
// rejected candidate is retried one byte further on, so it cannot hide a
// valid match that starts inside it. Go's regexps run in linear time, and
// the pattern sees at most the rest of the text from a hinted position, or
// only maxLen bytes of it if maxLen > 0 (which lets Go use its faster
// backtracking matcher); maxLen must exceed the longest possible match.
func anchoredRule(name, kind string, maxLen int, pattern string, next hint, ok accept) rule {
	re := regexp.MustCompile(`^(?:` + pattern + `)`)
	return rule{name: name, kind: kind, find: func(text string) []span {
		var out []span
		for pos := 0; pos < len(text); {
			at := next(text, pos)
			if at < 0 {
				break
			}
			window := text[at:]
			if maxLen > 0 && len(window) > maxLen {
				window = window[:maxLen]
			}
			if m := re.FindStringSubmatchIndex(window); m != nil {
				for k := range m {
					if m[k] >= 0 {
						m[k] += at
					}
				}
				if sp, good := ok(text, m); good && sp.end > sp.start {
					out = append(out, sp)
					pos = sp.end
					continue
				}
			}
			pos = at + 1
		}
		return out
	}}
}

// literal hints at the earliest occurrence of any of lits.
func literal(lits ...string) hint {
	return func(text string, from int) int {
		best := -1
		for _, lit := range lits {
			if i := strings.Index(text[from:], lit); i >= 0 && (best < 0 || i < best) {
				best = i
			}
		}
		if best < 0 {
			return -1
		}
		return from + best
	}
}

// foldLiteral hints at lower, compared ignoring ASCII case. It walks the
// occurrences of lower's first letter in either case, each found with
// strings.IndexByte.
func foldLiteral(lower string) hint {
	lo, up := lower[0], lower[0]-('a'-'A')
	return func(text string, from int) int {
		nl, nu := indexByteFrom(text, lo, from), indexByteFrom(text, up, from)
		for nl >= 0 || nu >= 0 {
			var i int
			if nu < 0 || nl >= 0 && nl < nu {
				i, nl = nl, indexByteFrom(text, lo, nl+1)
			} else {
				i, nu = nu, indexByteFrom(text, up, nu+1)
			}
			if i+len(lower) <= len(text) && equalFoldASCII(text[i:i+len(lower)], lower) {
				return i
			}
		}
		return -1
	}
}

func indexByteFrom(text string, c byte, from int) int {
	if i := strings.IndexByte(text[from:], c); i >= 0 {
		return from + i
	}
	return -1
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

func whole(_ string, m []int) (span, bool) { return span{m[0], m[1]}, true }

func group1(_ string, m []int) (span, bool) { return span{m[2], m[3]}, m[2] >= 0 }

// atWord accepts a match that starts a word: inside a longer word the same
// letters are coincidence.
func atWord(text string, m []int) (span, bool) {
	return span{m[0], m[1]}, wordStart(text, m[0])
}

// vendorKey accepts a prefixed key that starts a word and whose body, after
// prefixLen bytes, has a digit or an upper-case letter, as random keys do and
// hyphenated words (sk-this-is-not-a-key) do not.
func vendorKey(prefixLen int) accept {
	return func(text string, m []int) (span, bool) {
		body := text[m[0]+prefixLen : m[1]]
		return span{m[0], m[1]}, wordStart(text, m[0]) && strings.IndexFunc(body, func(r rune) bool {
			return r < 0x80 && (isDigit(byte(r)) || isUpper(byte(r)))
		}) >= 0
	}
}

// bearer accepts the token after "Bearer" when it looks generated: at least
// 12 characters with a digit, or 20 in mixed case. "Bearer token" and
// "Bearer YOUR_TOKEN_HERE" are prose.
func bearer(text string, m []int) (span, bool) {
	if m[0] > 0 && isAlnum(text[m[0]-1]) {
		return span{}, false
	}
	tok := text[m[2]:m[3]]
	var digit, upper, lower bool
	for i := range len(tok) {
		digit = digit || isDigit(tok[i])
		upper = upper || isUpper(tok[i])
		lower = lower || isLower(tok[i])
	}
	return span{m[2], m[3]}, len(tok) >= 12 && digit || len(tok) >= 20 && upper && lower
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
