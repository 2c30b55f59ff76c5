package redact

import "strings"

// findIBANs finds IBANs: a country code, two check digits and a BBAN of
// upper-case letters and digits, 15 to 34 characters in all, written in one
// run or in space-separated groups of 4. A candidate must pass the mod-97
// check and, for a country in the IBAN registry, have that country's length.
// Lower-case IBANs are not recognised.
func findIBANs(text string, steps *int) []span {
	*steps += len(text)
	var out []span
	for i := 0; i+15 <= len(text); i++ {
		if !isUpper(text[i]) || !isUpper(text[i+1]) || !isDigit(text[i+2]) || !isDigit(text[i+3]) {
			continue
		}
		if i > 0 && isAlnum(text[i-1]) {
			continue
		}
		if end, ok := iban(text, i); ok {
			out = append(out, span{i, end})
			i = end - 1
		}
	}
	return out
}

// iban returns the end of the IBAN starting at i. A grouped IBAN may be
// followed by an upper-case word ("BE68 5390 0754 7034 EUR"), so shorter
// group boundaries are tried too.
func iban(text string, i int) (int, bool) {
	var ends, counts [9]int
	n, count, j := 0, 4, i+4
	if j < len(text) && text[j] != ' ' {
		e := upperAlnumRunEnd(text, j)
		ends[0], counts[0], n = e, count+e-j, 1
	} else {
		for n < len(ends) && j+1 < len(text) && text[j] == ' ' {
			e := upperAlnumRunEnd(text, j+1)
			g := e - (j + 1)
			if g == 0 || g > 4 || count+g > 34 {
				break
			}
			count, j = count+g, e
			ends[n], counts[n] = j, count
			n++
			if g < 4 {
				break
			}
		}
	}
	want := ibanLengths[text[i:i+2]]
	for k := n - 1; k >= 0 && counts[k] >= 15; k-- {
		if counts[k] > 34 || want != 0 && counts[k] != want {
			continue
		}
		if ends[k] < len(text) && isAlnum(text[ends[k]]) {
			continue
		}
		if ibanValid(text[i:ends[k]]) {
			return ends[k], true
		}
	}
	return 0, false
}

func upperAlnumRunEnd(text string, i int) int {
	for i < len(text) && (isUpper(text[i]) || isDigit(text[i])) {
		i++
	}
	return i
}

// ibanValid applies the ISO 13616 check to s (spaces ignored): the check
// digits are 02 to 98 and, with the first four characters moved to the end
// and letters read as 10 to 35, the number is 1 modulo 97.
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || s[2:4] == "00" || s[2:4] == "01" || s[2:4] == "99" {
		return false
	}
	r := 0
	for _, c := range []byte(s[4:] + s[:4]) {
		switch {
		case isDigit(c):
			r = (r*10 + int(c-'0')) % 97
		case isUpper(c):
			r = (r*100 + int(c-'A') + 10) % 97
		default:
			return false
		}
	}
	return r == 1
}

func compactUpper(s string) string { return strings.ToUpper(strings.ReplaceAll(s, " ", "")) }

// ibanLengths is the IBAN length of each country in the SWIFT IBAN registry.
// A country code not listed is accepted at any length from 15 to 34, so a
// country joining the registry is not missed, only checked less strictly.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16,
	"BG": 22, "BH": 22, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28,
	"CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24,
	"FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
	"GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23,
	"IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
	"LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22,
	"MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
	"SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
