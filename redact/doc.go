// Package redact owns what of a model call's text may be stored: the rules
// that find personal data and credentials in request messages and response
// text, the placeholders that replace them, and the keyed digests stored
// where no text may be.
//
// # One point before any write
//
// Redaction happens once per record, in the code that builds the record,
// before anything is written: the database, a log line or an error message.
// A rule applied at each writer would be forgotten at one of them, and a
// placeholder numbering only means something when one Session sees every
// text of the record. Nothing downstream of that point ever holds the
// original text, so nothing downstream can leak it.
//
// # Policies
//
// The operator chooses one Policy per deployment or tenant:
//
//   - PolicyRedact (the default) stores the text of Session.Text with every
//     rule applied.
//   - PolicyHashOnly stores no text at all: only Digest(key, text) of each
//     original text, so support can confirm "was this the prompt?" by
//     digesting a candidate, and Session.Counts, so support sees what was
//     there.
//   - PolicyFull stores the text of a Session from RecordPolicy(PolicyFull),
//     which keeps e-mail addresses and phone numbers for support that must
//     contact people; credentials, card numbers, IBANs and custom matches
//     are still replaced. No policy stores a credential.
//
// # Placeholders
//
// A match becomes [TYPE_n]: EMAIL, PHONE, CARD, IBAN, SECRET (every kind
// of key and token) or a custom rule's upper-cased name. n counts distinct
// values of that type from 1 in order of appearance, across every Text
// call of one Session: the address in the request and the same address
// quoted in the response are both [EMAIL_1], a second address is
// [EMAIL_2]. Card numbers, IBANs and phone numbers are compared without
// separators and e-mail addresses without case, so "4111 1111 1111 1111"
// and "4111111111111111" are one card. A placeholder is made only of its
// type and a counter, never of any part of the value. A value once matched
// is also replaced wherever else it appears in the record, even where its
// rule would not fire. Placeholders already in the input are left alone,
// so redacting redacted text changes nothing.
//
// # Rules and their order
//
// Rules run in a fixed priority order, and a later rule only sees the text
// between earlier matches, never a placeholder:
//
//  1. secrets: PEM private key blocks; OpenAI (sk-, sk-proj-) and Anthropic
//     (sk-ant-) keys; GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
//     github_pat_); AWS access key ids (AKIA, ASIA) and labelled secret
//     access keys; Slack tokens (xoxb- and friends); Tollgate keys (tg_);
//     the token after "Bearer";
//  2. JWTs (three base64url segments, the first starting "eyJ");
//  3. IBANs, with the mod-97 check and the country's length;
//  4. payment card numbers, with the Luhn check;
//  5. e-mail addresses;
//  6. phone numbers: +CC international and common national formats;
//  7. custom rules, in the order given to New.
//
// Every rule is linear in the text, including text made of nothing but
// near-misses: prefixed secrets are found with strings.Index before an
// anchored regexp confirms them on a bounded window, and numbers and
// addresses are scanned by hand.
//
// # Trade-offs
//
// The rules lean towards replacing too much where a miss would be costly:
//
//   - About one number in ten passes Luhn, so one order number in ten that
//     is printed like a card (13 to 19 digits, one run or grouped 4-4-4-4,
//     4-6-5) and starts with 2 to 6 is replaced. Numbers starting 0, 1 or
//     7 to 9 (millisecond timestamps, most internal ids) survive, and so
//     would a card of those networks.
//   - Phone numbers need a '+' or a separator; bare digit runs survive, as
//     do national formats other than North American and trunk-0 ones. A
//     number glued to the next group ("+1 415 555 2671 2026") may take it.
//   - Vendor keys need a body with a digit or an upper-case letter, so
//     hyphenated words after "sk-" survive; "Bearer" needs a token of 12
//     characters with a digit or 20 in mixed case. AWS secret access keys
//     have no prefix and are found only after their label. HTTP Basic
//     credentials and other vendors' keys need a custom Rule.
//   - IBANs must be upper-case; the check digits and the country's length
//     keep false matches to about one candidate in a hundred.
//   - Once found, a value of at least 6 bytes is replaced wherever else it
//     appears in the record (for the first 64 such values), but a Text call
//     cannot take back what an earlier one returned.
package redact
