package redact

// findCards finds payment card numbers: 13 to 19 digits, either in one run
// or as a group of 4 followed by groups of 3 to 6 separated by one kind of
// separator (space or '-'), as cards are printed (4-4-4-4, 4-6-5, 4-4-4-4-3).
// The Luhn check lets 9 in 10 other numbers through; requiring the card
// grouping keeps dates and ranges ("2026-11-30 2026-12-01") apart from cards,
// and requiring the first digit of a payment network (2 to 6: Mastercard,
// Amex, Diners, JCB, Visa, Discover, UnionPay, Maestro) keeps millisecond
// timestamps (17…) and numbers with a leading zero apart.
func findCards(text string, steps *int) []span {
	*steps += len(text)
	if !atLeastDigits(text, 13) {
		return nil
	}
	var out []span
	for i := 0; i < len(text); {
		if !isDigit(text[i]) {
			i++
			continue
		}
		if text[i] >= '2' && text[i] <= '6' && numberStart(text, i) {
			if end, ok := card(text, i); ok {
				out = append(out, span{i, end})
				i = end
				continue
			}
		}
		i = digitRunEnd(text, i)
	}
	return out
}

// card returns the end of the longest Luhn-valid card number starting at i.
// When a grouped number runs on (a CVV or a year after it), the trailing
// groups are dropped one at a time until the rest passes.
func card(text string, i int) (int, bool) {
	run := digitRunEnd(text, i) - i
	if run != 4 {
		end := i + run
		return end, run >= 13 && run <= 19 && numberEnd(text, end) && luhn(text[i:end])
	}
	var ends, counts [4]int
	n, digits, j := 0, 4, i+4
	var sep byte
	for n < len(ends) && j+1 < len(text) {
		c := text[j]
		if c != ' ' && c != '-' || sep != 0 && c != sep {
			break
		}
		g := digitRunEnd(text, j+1) - (j + 1)
		if g < 3 || g > 6 || digits+g > 19 {
			break
		}
		sep, digits, j = c, digits+g, j+1+g
		ends[n], counts[n] = j, digits
		n++
	}
	for k := n - 1; k >= 1 && counts[k] >= 13; k-- {
		if numberEnd(text, ends[k]) && luhn(text[i:ends[k]]) {
			return ends[k], true
		}
	}
	return 0, false
}

// numberStart reports whether a number can begin at i: not inside a word, a
// decimal ("3.14159…"), a thousands group, or after '+' (a phone number).
func numberStart(text string, i int) bool {
	if i == 0 {
		return true
	}
	c := text[i-1]
	return !isAlnum(c) && c != '.' && c != ',' && c != '+'
}

// numberEnd reports whether a number can end at i: not followed by a letter,
// a digit, or a decimal part.
func numberEnd(text string, i int) bool {
	if i >= len(text) {
		return true
	}
	c := text[i]
	if isAlnum(c) {
		return false
	}
	return !((c == '.' || c == ',') && i+1 < len(text) && isDigit(text[i+1]))
}

func digitRunEnd(text string, i int) int {
	for i < len(text) && isDigit(text[i]) {
		i++
	}
	return i
}

// luhn reports whether the digits of s pass the Luhn check; other bytes are
// skipped.
func luhn(s string) bool {
	sum, n := 0, 0
	for i := len(s) - 1; i >= 0; i-- {
		if !isDigit(s[i]) {
			continue
		}
		d := int(s[i] - '0')
		if n%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
	}
	return n > 0 && sum%10 == 0
}
