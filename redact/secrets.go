package redact

import "strings"

// secretRules returns the rules for credentials, all of type SECRET, in
// order: PEM private keys (whose body may hold anything), vendor keys by
// prefix, labelled AWS secrets, bearer tokens, then JWTs.
func secretRules() []rule {
	rules := []anchored{{
		name:    "private-key",
		pattern: `-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`,
		next:    nextPrivateKey,
		accept:  whole,
	}, {
		// OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-api03-).
		name:    "openai-anthropic",
		pattern: `sk-[A-Za-z0-9_-]{20,}`,
		window:  runWindow(len("sk-"), isTokenByte),
		next:    prefix("sk-"),
		accept:  vendorKey(len("sk-")),
		resume:  skipRun(len("sk-"), isTokenByte),
	}, {
		name:    "github",
		pattern: `gh[pousr]_[A-Za-z0-9]{36,}`,
		window:  runWindow(len("ghp_"), isAlnum),
		next:    prefix("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
		accept:  vendorKey(len("ghp_")),
		resume:  skipRun(len("ghp_"), isAlnum),
	}, {
		name:    "github-pat",
		pattern: `github_pat_[A-Za-z0-9_]{22,}`,
		window:  runWindow(len("github_pat_"), isWordByte),
		next:    prefix("github_pat_"),
		accept:  vendorKey(len("github_pat_")),
		resume:  skipRun(len("github_pat_"), isWordByte),
	}, {
		name:    "aws-access-key-id",
		pattern: `A[KS]IA[A-Z0-9]{16}\b`,
		window:  upTo(len("AKIA") + 16 + 1),
		next:    prefix("AKIA", "ASIA"),
		accept:  whole,
	}, {
		// The 40-character secret has no prefix of its own, so it needs its
		// label: aws_secret_access_key=…, "SecretAccessKey": "…", within
		// 128 bytes.
		name:    "aws-secret-access-key",
		pattern: `(?i)secret[_ ]?(?:access[_ ]?)?key["']?[ \t]*[:=][ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)`,
		window:  upTo(128),
		next:    foldLiteral("secret"),
		accept:  group1,
	}, {
		name:    "slack",
		pattern: `xox[baprs]-[A-Za-z0-9-]{10,}`,
		window:  runWindow(len("xoxb-"), isSlackByte),
		next:    prefix("xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"),
		accept:  vendorKey(len("xoxb-")),
		resume:  skipRun(len("xoxb-"), isSlackByte),
	}, {
		// Tollgate's own keys: tg_ and 32 random bytes in base64url (43
		// characters). A longer run is redacted too.
		name:    "tollgate",
		pattern: `tg_[A-Za-z0-9_-]{43,}`,
		window:  runWindow(len("tg_"), isTokenByte),
		next:    prefix("tg_"),
		accept:  vendorKey(len("tg_")),
		resume:  skipRun(len("tg_"), isTokenByte),
	}, {
		name:    "bearer",
		pattern: `(?i)bearer[ \t]+([A-Za-z0-9._~+/-]+=*)`,
		window:  bearerWindow,
		next:    foldLiteral("bearer"),
		accept:  bearer,
	}, {
		// A candidate inside a failed one shares its tail and has a shorter
		// first segment, so it fails too.
		name:    "jwt",
		pattern: `eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`,
		window:  jwtWindow,
		next:    prefix("eyJ"),
		accept:  whole,
		resume:  skipRun(len("eyJ"), isTokenByte),
	}}
	out := make([]rule, len(rules))
	for i, a := range rules {
		a.kind = KindSecret
		out[i] = a.rule()
	}
	return out
}

func whole(_ string, m []int) (span, bool) { return span{m[0], m[1]}, true }

func group1(_ string, m []int) (span, bool) { return span{m[2], m[3]}, m[2] >= 0 }

// vendorKey accepts a prefixed key whose body, after prefixLen bytes, has a
// digit or an upper-case letter, as random keys do and hyphenated words
// (sk-this-is-not-a-key) do not.
func vendorKey(prefixLen int) accept {
	return func(text string, m []int) (span, bool) {
		body := text[m[0]+prefixLen : m[1]]
		return span{m[0], m[1]}, strings.IndexFunc(body, func(r rune) bool {
			return r < 0x80 && (isDigit(byte(r)) || isUpper(byte(r)))
		}) >= 0
	}
}

// bearer accepts the token after "Bearer" when it looks generated: at least
// 12 characters with a digit, or 20 in mixed case. "Bearer token" and
// "Bearer YOUR_TOKEN_HERE" are prose.
func bearer(text string, m []int) (span, bool) {
	if !wordStart(text, m[0]) {
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

// nextPrivateKey hints at a PEM header for a private key, checked by hand so
// that the regexp, which reads to the end of the block or of the text, runs
// only where it will match.
func nextPrivateKey(text string, from int) int {
	for {
		i := indexFrom(text, "-----BEGIN", from)
		if i < 0 {
			return -1
		}
		j := runEnd(text, i+len("-----BEGIN"), func(c byte) bool { return isUpper(c) || isDigit(c) || c == ' ' })
		label := text[i:j]
		if strings.HasPrefix(text[j:], "-----") && (strings.HasSuffix(label, "PRIVATE KEY") || strings.HasSuffix(label, "PRIVATE KEY BLOCK")) {
			return i
		}
		from = i + 1
	}
}

// jwtWindow covers three dot-separated base64url segments.
func jwtWindow(text string, at int) int {
	i := runEnd(text, at, isTokenByte)
	for range 2 {
		if i < len(text) && text[i] == '.' {
			i = runEnd(text, i+1, isTokenByte)
		}
	}
	return i + 1
}

// bearerWindow covers "bearer", the blanks after it and the token.
func bearerWindow(text string, at int) int {
	i := runEnd(text, at+len("bearer"), func(c byte) bool { return c == ' ' || c == '\t' })
	if i == at+len("bearer") { // no blank: the pattern cannot match, and "bearerbearer…" must not cost a window each
		return i + 1
	}
	return runEnd(text, i, func(c byte) bool { return isAlnum(c) || strings.IndexByte("._~+/-=", c) >= 0 }) + 1
}

func isTokenByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }
func isWordByte(c byte) bool  { return isAlnum(c) || c == '_' }
func isSlackByte(c byte) bool { return isAlnum(c) || c == '-' }
