package redact

import "strings"

// findEmails finds e-mail addresses: a local part of letters, digits and
// ._%+- before an '@', and a domain of at least two labels after it, the
// last alphabetic. Each '@' is expanded by hand, which is far cheaper than
// a regexp that must try every position. Quoted local parts, IP-literal
// domains and internationalised addresses are not recognised.
func findEmails(text string, steps *int) []span {
	*steps += len(text)
	var out []span
	for pos := 0; pos < len(text); {
		i := strings.IndexByte(text[pos:], '@')
		if i < 0 {
			break
		}
		at := pos + i
		start := at
		for start > pos && isLocalByte(text[start-1]) {
			start--
		}
		for start < at && text[start] == '.' { // "…bob@example.com"
			start++
		}
		if end := domainEnd(text, at+1); start < at && end > 0 {
			out = append(out, span{start, end})
			pos = end
			continue
		}
		pos = at + 1
	}
	return out
}

func isLocalByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._%+-", c) >= 0
}

// domainEnd returns the end of the longest domain starting at i whose labels
// are valid and whose last label is a top-level domain, or -1. A trailing
// '.' (end of sentence) is not part of it.
func domainEnd(text string, i int) int {
	j := i
	for j < len(text) && (isAlnum(text[j]) || text[j] == '.' || text[j] == '-') {
		j++
	}
	for j > i && (text[j-1] == '.' || text[j-1] == '-') {
		j--
	}
	best, labels := -1, 0
	for k := i; k < j; {
		l := k
		for l < j && text[l] != '.' {
			l++
		}
		label := text[k:l]
		if !validLabel(label) {
			break
		}
		if labels++; labels >= 2 && isTLD(label) {
			best = l
		}
		k = l + 1
	}
	return best
}

func validLabel(s string) bool {
	return len(s) >= 1 && len(s) <= 63 && s[0] != '-' && s[len(s)-1] != '-'
}

func isTLD(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i := range len(s) {
		if !isLetter(s[i]) {
			return false
		}
	}
	return true
}
