package redact

// maxIdentifier bounds a plain identifier, in bytes: longer than any
// model name or finish reason a provider sends, shorter than most keys.
const maxIdentifier = 64

// PlainIdentifier reports whether s is a short code-shaped string that a
// record may hold as is where a provider names something (the answer's
// model, a finish or stop reason, a system fingerprint): 1-64 bytes of
// ASCII letters, digits and . _ : / + - @, no space. Real names fit:
// "gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929",
// "@cf/meta/llama-3.1-8b-instruct", "accounts/fireworks/models/x",
// "claude-3-5-sonnet@20240620", "fp_44709d6fcb", "end_turn". '@' may
// start the string, follow a '/', or come before digits only, so an email
// address is never an identifier. Anything else (a sentence, an address,
// text in any script) is the provider's text and goes through the owner's
// policy like client text. A secret can be code-shaped too: callers also
// run the identifier past the credential rules (see tasks).
func PlainIdentifier(s string) bool {
	if s == "" || len(s) > maxIdentifier {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlnum(c), c == '.', c == '_', c == ':', c == '/', c == '+', c == '-':
		case c == '@':
			if i > 0 && s[i-1] != '/' && !allDigits(s[i+1:]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
