package redact

import (
	"testing"
)

func TestSecrets(t *testing.T) {
	t.Parallel()
	openai := fake("sk-", 48, 1)
	project := fake("sk-proj-", 156, 2)
	anthropic := fake("sk-ant-api03-", 93, 3) + "AA"
	ghp, gho, ghs := fake("ghp_", 36, 4), fake("gho_", 36, 5), fake("ghs_", 36, 6)
	pat := fake("github_pat_", 22, 7) + "_" + fake("", 59, 8)
	slack := "xoxb-" + "2048123456-4096123456789-" + fake("", 24, 9)
	tollgate := fake("tg_", 43, 10)
	tollgateDash := "tg_-" + fake("", 41, 11) + "_"
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + fake("MIIEow", 64, 12) + "\n" + fake("", 64, 13) + "\n-----END RSA PRIVATE KEY-----"
	runTextCases(t, []textCase{
		{"openai", "key: " + openai, "key: [SECRET_1]"},
		{"openai project in env", "OPENAI_API_KEY=" + project + "\n", "OPENAI_API_KEY=[SECRET_1]\n"},
		{"anthropic in json", `{"x-api-key": "` + anthropic + `"}`, `{"x-api-key": "[SECRET_1]"}`},
		{"github classic", "token " + ghp + ".", "token [SECRET_1]."},
		{"github oauth and server", gho + " " + ghs, "[SECRET_1] [SECRET_2]"},
		{"github fine-grained", "GH_TOKEN='" + pat + "'", "GH_TOKEN='[SECRET_1]'"},
		{"aws access key id", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID=[SECRET_1]"},
		{"aws session key id", "id ASIA" + "Y34FZKBOKMUTVV7A,", "id [SECRET_1],"},
		{"aws secret in ini", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "aws_secret_access_key = [SECRET_1]\n"},
		{"aws secret in json", `"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`, `"SecretAccessKey": "[SECRET_1]"`},
		{"slack bot", "SLACK_BOT_TOKEN=" + slack, "SLACK_BOT_TOKEN=[SECRET_1]"},
		{"slack user", "xoxp-" + "1234567890-" + fake("", 20, 14), "[SECRET_1]"},
		{"tollgate", "Authorization: " + tollgate, "Authorization: [SECRET_1]"},
		{"tollgate with - and _", "key=" + tollgateDash + " ok", "key=[SECRET_1] ok"},
		{"bearer opaque", "Authorization: Bearer " + fake("", 32, 15) + "\r\n", "Authorization: Bearer [SECRET_1]\r\n"},
		{"bearer lower case", "-H 'authorization: bearer abc123def456ghi789'", "-H 'authorization: bearer [SECRET_1]'"},
		{"bearer with vendor key", "Bearer " + openai, "Bearer [SECRET_1]"},
		{"pem block", "here:\n" + pem + "\nthanks", "here:\n[SECRET_1]\nthanks"},
		{"pem block cut short", "key:\n-----BEGIN PRIVATE KEY-----\n" + fake("MIIE", 40, 16), "key:\n[SECRET_1]"},
		{"same key twice", openai + " and again " + openai, "[SECRET_1] and again [SECRET_1]"},
		{"key after _", "MY_TOKEN_" + tollgate, "MY_TOKEN_[SECRET_1]"},
		{"key glued to a word after a detection", "k=" + openai + " token" + openai, "k=[SECRET_1] token[SECRET_1]"},
	})
}

func TestJWT(t *testing.T) {
	t.Parallel()
	// The jwt.io example token.
	const jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	const unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0."
	runTextCases(t, []textCase{
		{"bare", jwt, "[SECRET_1]"},
		{"query parameter", "https://app.example/cb#id_token=" + jwt + "&state=1", "https://app.example/cb#id_token=[SECRET_1]&state=1"},
		{"bearer header", "Authorization: Bearer " + jwt, "Authorization: Bearer [SECRET_1]"},
		{"unsigned", "token " + unsigned + " end", "token [SECRET_1] end"},
		{"json", `{"access_token":"` + jwt + `"}`, `{"access_token":"[SECRET_1]"}`},
	})
}

func TestIBAN(t *testing.T) {
	t.Parallel()
	runTextCases(t, []textCase{
		{"de grouped", "IBAN: DE89 3704 0044 0532 0130 00.", "IBAN: [IBAN_1]."},
		{"gb compact", "pay GB82WEST12345698765432 today", "pay [IBAN_1] today"},
		{"gb grouped", "GB82 WEST 1234 5698 7654 32", "[IBAN_1]"},
		{"fr with letter in bban", "FR14 2004 1010 0505 0001 3M02 606", "[IBAN_1]"},
		{"nl compact", "(NL91ABNA0417164300)", "([IBAN_1])"},
		{"no shortest", "NO9386011117947", "[IBAN_1]"},
		{"be followed by currency", "BE68 5390 0754 7034 EUR 100", "[IBAN_1] EUR 100"},
		{"it", "IT60 X054 2811 1010 0000 0123 456", "[IBAN_1]"},
		{"same iban grouped and compact", "DE89 3704 0044 0532 0130 00 = DE89370400440532013000", "[IBAN_1] = [IBAN_1]"},
		keep("wrong check digits", "DE88 3704 0044 0532 0130 00"),
		keep("too short for its country", "DE89 3704 0044 0532 0130"),
		keep("lower case", "de89 3704 0044 0532 0130 00"),
		keep("glued to a word", "xDE89370400440532013000"),
		keep("part code", "SKU AB12 CDEF GHIJ KLMN"),
	})
}

func TestCard(t *testing.T) {
	t.Parallel()
	runTextCases(t, []textCase{
		{"visa spaced", "card 4111 1111 1111 1111 exp 12/27", "card [CARD_1] exp 12/27"},
		{"mastercard dashed", "5500-0000-0000-0004", "[CARD_1]"},
		{"mastercard 2-series", "2223003122003222", "[CARD_1]"},
		{"amex 4-6-5", "Amex: 3782 822463 10005.", "Amex: [CARD_1]."},
		{"discover compact", "number=6011111111111117&cvv=123", "number=[CARD_1]&cvv=123"},
		{"jcb", "3530111333300000", "[CARD_1]"},
		{"19 digits", "6304000000000000000", "[CARD_1]"},
		{"cvv after the number", "4111 1111 1111 1111 123", "[CARD_1] 123"},
		{"year after the number", "4111-1111-1111-1111-2026", "[CARD_1]-2026"},
		{"same card two ways", "4111 1111 1111 1111 / 4111111111111111", "[CARD_1] / [CARD_1]"},
		keep("order number failing luhn", "Order 4111 1111 1111 1112 shipped"),
		keep("long order number failing luhn", "order #1234567890123"),
		keep("millisecond timestamp", `"created": 1764460800000`),
		keep("two dates", "from 2026-11-30 2026-12-01"),
		keep("decimal", "pi is 3.14159265358979323846"),
		keep("amount", "total 4111111111111111.50 EUR"),
		keep("glued to a word", "ref4111111111111111"),
		keep("twenty digits", "41111111111111111111"),
	})
}

func TestEmail(t *testing.T) {
	t.Parallel()
	runTextCases(t, []textCase{
		{"plain", "write to alice@example.com today", "write to [EMAIL_1] today"},
		{"tag and subdomains", "Bob.Smith+tag@mail.example.co.uk", "[EMAIL_1]"},
		{"angle brackets", "Carol <carol_x-y@sub-domain.example.io>", "Carol <[EMAIL_1]>"},
		{"mailto", "mailto:dave@example.net?subject=hi", "mailto:[EMAIL_1]?subject=hi"},
		{"end of sentence", "ask eve@example.com.", "ask [EMAIL_1]."},
		{"url userinfo", "https://user:s3cret@example.com/x", "https://user:[EMAIL_1]/x"},
		{"case-insensitive", "Alice@Example.com and alice@example.com", "[EMAIL_1] and [EMAIL_1]"},
		keep("mention", "thanks @alice"),
		keep("no tld", "user@localhost"),
		keep("numeric tld", "foo@bar.123"),
		keep("domain only", "see example.com"),
		keep("git reflog", "HEAD@{1}"),
	})
}

func TestPhone(t *testing.T) {
	t.Parallel()
	runTextCases(t, []textCase{
		{"us international", "call +1 (415) 555-2671 now", "call [PHONE_1] now"},
		{"uk international", "+44 20 7946 0958", "[PHONE_1]"},
		{"de international", "Tel.: +49 30 901820", "Tel.: [PHONE_1]"},
		{"de with (0)", "+49 (0)30 901820", "[PHONE_1]"},
		{"fr international", "+33 1 23 45 67 89", "[PHONE_1]"},
		{"e164 compact", "whatsapp +14155552671.", "whatsapp [PHONE_1]."},
		{"us parentheses", "(415) 555-2671", "[PHONE_1]"},
		{"us dashes", "415-555-2671", "[PHONE_1]"},
		{"us dots", "phone: 415.555.2671", "phone: [PHONE_1]"},
		{"us with 1", "1-415-555-2671", "[PHONE_1]"},
		{"uk national", "020 7946 0958", "[PHONE_1]"},
		{"de mobile", "0151 23456789", "[PHONE_1]"},
		{"de slash", "030/901820", "[PHONE_1]"},
		{"nl mobile", "06-12345678", "[PHONE_1]"},
		{"fr national", "01 23 45 67 89", "[PHONE_1]"},
		keep("date", "due 2026-11-30"),
		keep("short number", "room 12345"),
		keep("bare digits", "order 4155552671"),
		keep("order number with separators", "order 123-456-7890"),
		keep("version", "go 1.26.3"),
		keep("ip address", "host 192.168.100.200"),
		keep("uuid", "id 123e4567-e89b-12d3-a456-426614174000"),
		keep("iso timestamp", "at 2026-11-30T12:00:00Z"),
		keep("dotted date", "on 01.12.2026"),
		keep("dotted date and time", "on 01.12.2026 10:30"),
		keep("short international", "+1 555"),
		keep("seven digits", "555-2671"),
		keep("isbn", "ISBN 978-3-16-148410-0"),
		keep("arithmetic", "2+2=4 and 1e+10"),
	})
}

// TestOrder checks that a higher-priority rule claims its text first.
func TestOrder(t *testing.T) {
	t.Parallel()
	key := fake("sk-", 40, 20)
	runTextCases(t, []textCase{
		{"key inside an e-mail-like string", key + "@example.com", "[SECRET_1]@example.com"},
		{"iban digits are not a card", "DE89370400440532013000", "[IBAN_1]"},
		{"card inside bearer is a secret", "Bearer 4111111111111111", "Bearer [SECRET_1]"},
		{"numbering follows position per type", "a@example.com " + key + " b@example.com", "[EMAIL_1] [SECRET_1] [EMAIL_2]"},
	})
}

// TestSurvives lists ordinary technical text that no rule may touch.
func TestSurvives(t *testing.T) {
	t.Parallel()
	runTextCases(t, []textCase{
		keep("sk-ing", "we went sk-ing in the alps"),
		keep("task id", "task-123 and task-sk-4567"),
		keep("hyphenated words after sk-", "sk-this-is-not-a-real-key-at-all"),
		keep("sk- inside a word", "risk-0123456789abcdefghijKLMN"),
		keep("short prefixes", "ghp_short xoxb-short tg_short AKIA1234 eyJ"),
		keep("too long for an aws key id", "AKIAIOSFODNN7EXAMPLEX"),
		keep("placeholder tollgate key", "tg_not-a-real-key"),
		keep("bearer prose", "use a Bearer token, e.g. Bearer <token> or Bearer YOUR_TOKEN_HERE"),
		keep("public key", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"),
		keep("uuid", "550e8400-e29b-41d4-a716-446655440000"),
		keep("iso timestamps", "2026-11-30T12:00:00Z 2026-11-30T12:00:00.123456789+01:00"),
		keep("versions", "v1.2.3, 1.2.3-rc.1, go1.26.0"),
		keep("hex digest", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
		keep("code", "for i := 0; i < 1000; i++ { x[i] = i * 31 }"),
		keep("money", "$1,234,567.89 or 1.234.567,89 EUR"),
	})
}
