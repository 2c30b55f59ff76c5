package redact

import "strings"

// Phone number shapes. Each starts with a different character ('+', '0',
// '1', '(' or 2-9), so their alternation never hides one behind another.
const (
	// +CC then 2 to 7 groups, optionally separated, one of which may be in
	// parentheses: +1 (415) 555-2671, +44 20 7946 0958, +49 (0)30 901820,
	// +14155552671.
	phoneIntl = `\+[1-9][0-9]{0,2}(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,5})){2,7}`
	// North American: (415) 555-2671, 415-555-2671, 415.555.2671,
	// 1-415-555-2671. Area code and exchange start with 2-9, as NANP numbers
	// do and "123-456-7890" order numbers do not.
	phoneNANP = `(?:1[ .\-]?)?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[2-9][0-9]{2}[ .\-][0-9]{4}`
	// National with trunk prefix 0: 020 7946 0958, 0151 23456789, 030/901820,
	// 01 23 45 67 89, 06-12345678.
	phoneTrunk = `0[0-9]{1,4}(?:[ .\-/][0-9]{2,8}){1,4}`
)

// phoneRule finds phone numbers with a separator or a '+': a bare run of
// digits is an order number as often as a phone number, and is left alone.
func phoneRule() rule {
	r := anchored{
		name:    "phone",
		kind:    KindPhone,
		pattern: phoneIntl + `|` + phoneNANP + `|` + phoneTrunk,
		window:  upTo(maxPhone),
		next:    nextPhone,
		accept:  phoneOK,
	}.rule()
	r.norm = func(s string) string {
		d := digitsOnly(s)
		if strings.HasPrefix(s, "+") {
			return "+" + d
		}
		return d
	}
	find := r.find
	r.find = func(text string, steps *int) []span {
		if !atLeastDigits(text, 8) {
			*steps += len(text)
			return nil
		}
		return find(text, steps)
	}
	return r
}

// maxPhone bounds how far ahead nextPhone counts digits and how much text the
// patterns see: longer than any match of them.
const maxPhone = 64

// nextPhone hints at the next place a phone number can start: a '+', '(' or
// digit at a number boundary with at least 8 digits among the phone-like
// characters that follow.
func nextPhone(text string, from int) int {
	for i := from; i < len(text); i++ {
		c := text[i]
		if !isDigit(c) && !((c == '+' || c == '(') && i+1 < len(text) && isDigit(text[i+1])) {
			continue
		}
		if !phoneStart(text, i) {
			continue
		}
		digits := 0
		for j := i; j < len(text) && j < i+maxPhone && digits < 8; j++ {
			if c := text[j]; isDigit(c) {
				digits++
			} else if !isPhoneSeparator(c) {
				break
			}
		}
		if digits >= 8 {
			return i
		}
	}
	return -1
}

func isPhoneSeparator(c byte) bool {
	switch c {
	case ' ', '(', ')', '.', '-', '/', '+':
		return true
	}
	return false
}

// phoneStart reports whether a phone number can begin at i: not inside a
// word or another number (a version, an IP address, a range), and not in
// the middle of a sequence of digit groups ("DE88 3704 0044 0532 0130 00"
// is a mistyped IBAN, not text followed by the phone number "0532 0130 00").
func phoneStart(text string, i int) bool {
	if i == 0 {
		return true
	}
	c := text[i-1]
	if c == ' ' && i >= 2 && isDigit(text[i-2]) {
		return false
	}
	return !isAlnum(c) && strings.IndexByte(".,-/+_", c) < 0
}

// phoneOK checks a match's digit count and context: international numbers
// have 8 to 15 digits (E.164), North American ones 10 (11 with the leading
// 1), trunk-prefixed ones 9 to 13 with one kind of separator, which rules
// out "01.12.2026 10" and most other dates. The number must not run on into
// a word or a decimal.
func phoneOK(text string, m []int) (span, bool) {
	s, e := m[0], m[1]
	if !phoneStart(text, s) || !numberEnd(text, e) {
		return span{}, false
	}
	if e < len(text) && strings.IndexByte(".-/", text[e]) >= 0 && e+1 < len(text) && isDigit(text[e+1]) {
		return span{}, false
	}
	match := text[s:e]
	d := len(digitsOnly(match))
	var ok bool
	switch match[0] {
	case '+':
		ok = d >= 8 && d <= 15
	case '0':
		ok = d >= 9 && d <= 13 && oneSeparator(match)
	default:
		ok = d == 10 || d == 11
	}
	return span{s, e}, ok
}

// oneSeparator reports whether every non-digit byte of s is the same.
func oneSeparator(s string) bool {
	var sep byte
	for i := range len(s) {
		if c := s[i]; !isDigit(c) {
			if sep != 0 && c != sep {
				return false
			}
			sep = c
		}
	}
	return true
}
