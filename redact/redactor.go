package redact

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Placeholder types issued by the built-in rules. They are the keys of
// Session.Counts; custom rules add their own.
const (
	KindEmail  = "EMAIL"
	KindPhone  = "PHONE"
	KindCard   = "CARD"
	KindIBAN   = "IBAN"
	KindSecret = "SECRET"
)

// ErrInvalidRule is returned by New for a custom rule it cannot use.
var ErrInvalidRule = errors.New("redact: invalid rule")

// Rule is a caller-supplied detector, run after every built-in rule.
type Rule struct {
	// Name is the placeholder type. It must match [A-Za-z][A-Za-z0-9_]* and
	// is upper-cased: "employee_id" issues [EMPLOYEE_ID_1]. Naming a built-in
	// type ("secret", "phone") adds a pattern to that type and shares its
	// numbering.
	Name string
	// Pattern finds candidates. It must not match the empty string.
	Pattern *regexp.Regexp
	// Validate, if not nil, is called with each candidate and rejects it by
	// returning false. It must be safe for concurrent use.
	Validate func(match string) bool
}

// Redactor holds the compiled rules. It is immutable and safe for concurrent
// use; build one at start-up and start a Session per record.
type Redactor struct {
	rules    []rule // in priority order
	full     []rule // rules minus contact data, for PolicyFull
	existing *regexp.Regexp
}

// New compiles the built-in rules followed by the custom ones, in the order
// given. It returns an error wrapping ErrInvalidRule for a custom rule with a
// bad name, no pattern, or a pattern that matches the empty string.
func New(custom ...Rule) (*Redactor, error) {
	rules := builtinRules()
	kinds := []string{KindSecret, KindIBAN, KindCard, KindEmail, KindPhone}
	for i, c := range custom {
		kind, err := customKind(c)
		if err != nil {
			return nil, fmt.Errorf("%w %d (%q): %s", ErrInvalidRule, i, c.Name, err)
		}
		rules = append(rules, customRule(kind, c))
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	var full []rule
	for _, r := range rules {
		if r.kind != KindEmail && r.kind != KindPhone {
			full = append(full, r)
		}
	}
	// Placeholders already in the input, from an earlier pass or pasted by a
	// user, are left alone so redaction is idempotent even when a custom
	// pattern could match inside one. The number is capped so a long digit
	// run dressed up as a placeholder is still inspected.
	existing := regexp.MustCompile(`\[(?:` + strings.Join(kinds, "|") + `)_[1-9][0-9]{0,5}\]`)
	return &Redactor{rules: rules, full: full, existing: existing}, nil
}

func customKind(c Rule) (string, error) {
	if !validName(c.Name) {
		return "", errors.New("name must be a letter followed by letters, digits or underscores")
	}
	if c.Pattern == nil {
		return "", errors.New("no pattern")
	}
	if c.Pattern.MatchString("") {
		return "", fmt.Errorf("pattern %q matches the empty string", c.Pattern)
	}
	return strings.ToUpper(c.Name), nil
}

func validName(s string) bool {
	if s == "" || len(s) > 32 || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}

func customRule(kind string, c Rule) rule {
	re, validate := c.Pattern, c.Validate
	return rule{name: "custom:" + kind, kind: kind, find: func(text string, steps *int) []span {
		*steps += len(text)
		var out []span
		for _, m := range re.FindAllStringIndex(text, -1) {
			if m[1] > m[0] && (validate == nil || validate(text[m[0]:m[1]])) {
				out = append(out, span{m[0], m[1]})
			}
		}
		return out
	}}
}

// Record starts the redaction of one record under PolicyRedact.
func (r *Redactor) Record() *Session { return r.RecordPolicy(PolicyRedact) }

// RecordPolicy starts the redaction of one record under p. PolicyFull leaves
// e-mail addresses and phone numbers in place; every other policy, including
// an unknown one, applies every rule.
func (r *Redactor) RecordPolicy(p Policy) *Session {
	rules := r.rules
	if p == PolicyFull {
		rules = r.full
	}
	return &Session{
		rules:    rules,
		existing: r.existing,
		seen:     make(map[string]string),
		known:    make(map[string]string),
		counts:   make(map[string]int),
	}
}

// Session redacts the texts of one record (request messages, response) with
// one numbering: a value seen twice gets the same placeholder. It is not safe
// for concurrent use.
type Session struct {
	rules    []rule
	existing *regexp.Regexp
	seen     map[string]string // kind + "\x00" + normalised value → placeholder
	known    map[string]string // value exactly as found → placeholder
	counts   map[string]int    // placeholders issued per kind
	fresh    []string          // values that became known in the current Text call
	repl     []replacement     // of the current pass, in order
	steps    int               // bytes read by rules and searches, for tests of linearity
	cursors  []knownCursor     // findKnown's, reused
}

type replacement struct {
	start, end  int
	placeholder string
}

// Detected values are also replaced wherever else they appear in the record,
// even where their rule would not fire (a key glued to a word, a card
// number after a letter). Values shorter than minKnown are not, since they
// would chew holes in ordinary words, and only the first maxKnown values of
// a record are, which bounds the cost of looking for them.
const (
	minKnown = 6
	maxKnown = 64
)

// maxPasses bounds how often Text goes over one input; see Text.
const maxPasses = 3

// Text returns in with every match replaced by its placeholder. It returns
// in itself when nothing matched.
func (s *Session) Text(in string) string {
	s.fresh = s.fresh[:0]
	for i := 1; ; i++ {
		n := len(s.fresh)
		out := s.pass(in)
		// Text is processed left to right, so a value first found late in in
		// may have been missed earlier where its rule is blind: go again,
		// now that it is known, until no pass finds a new value.
		if len(s.fresh) == n || i == maxPasses {
			return out
		}
		s.steps += len(out) * len(s.fresh)
		if !containsAny(out, s.fresh) {
			return out
		}
	}
}

// pass redacts in once.
func (s *Session) pass(in string) string {
	s.repl = s.repl[:0]
	last := 0
	if strings.IndexByte(in, '[') >= 0 {
		for _, m := range s.existing.FindAllStringIndex(in, -1) {
			s.redact(in[last:m[0]], last)
			last = m[1]
		}
	}
	s.redact(in[last:], last)
	if len(s.repl) == 0 {
		return in
	}
	var b strings.Builder
	b.Grow(len(in))
	last = 0
	for _, r := range s.repl {
		b.WriteString(in[last:r.start])
		b.WriteString(r.placeholder)
		last = r.end
	}
	b.WriteString(in[last:])
	return b.String()
}

func containsAny(s string, values []string) bool {
	for _, v := range values {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// Counts returns how many distinct placeholders of each type the session has
// issued so far, e.g. {"EMAIL": 2, "SECRET": 1}. The map is a copy.
func (s *Session) Counts() map[string]int { return maps.Clone(s.counts) }

// redact records the replacements for text, which starts at offset off of
// the current input. The first rule, in priority order, that matches
// anywhere claims its spans; the pieces between them start again from the
// first rule, because a piece on its own can match where the whole did not
// (its edges are now text boundaries). Pieces are always shorter than text,
// so this ends, and no rule ever sees a placeholder.
func (s *Session) redact(text string, off int) {
	if text == "" {
		return
	}
	for i := range s.rules {
		r := &s.rules[i]
		found := r.find(text, &s.steps)
		if len(found) == 0 {
			continue
		}
		last := 0
		for _, sp := range found {
			s.redact(text[last:sp.start], off+last)
			s.add(off+sp.start, off+sp.end, s.issue(r, text[sp.start:sp.end]))
			last = sp.end
		}
		s.redact(text[last:], off+last)
		return
	}
	last := 0
	for _, k := range s.findKnown(text) {
		s.redact(text[last:k.start], off+last)
		s.add(off+k.start, off+k.end, k.placeholder)
		last = k.end
	}
	if last > 0 {
		s.redact(text[last:], off+last)
	}
}

func (s *Session) add(start, end int, placeholder string) {
	s.repl = append(s.repl, replacement{start, end, placeholder})
}

// issue returns the placeholder for a match of r, reusing the one given to
// an equal value earlier in the record.
func (s *Session) issue(r *rule, match string) string {
	norm := match
	if r.norm != nil {
		norm = r.norm(match)
	}
	key := r.kind + "\x00" + norm
	p, ok := s.seen[key]
	if !ok {
		s.counts[r.kind]++
		p = "[" + r.kind + "_" + strconv.Itoa(s.counts[r.kind]) + "]"
		s.seen[key] = p
	}
	if len(match) >= minKnown && len(s.known) < maxKnown {
		if _, ok := s.known[match]; !ok {
			s.known[match] = p
			s.fresh = append(s.fresh, match)
		}
	}
	return p
}

// knownCursor follows one known value through a text.
type knownCursor struct {
	value, placeholder string
	next               int // start of the value's next occurrence at or after the scan, or -1
}

// knownMatch is an occurrence of a value already replaced in this record.
type knownMatch struct {
	span
	placeholder string
}

// findKnown returns the occurrences in text of values already replaced in
// this record, left to right without overlap, the longest where two start
// together. Each value's search only moves forward, so the cost is the
// length of text times the number of known values, however many
// occurrences there are.
func (s *Session) findKnown(text string) []knownMatch {
	if len(s.known) == 0 || len(text) < minKnown {
		return nil
	}
	s.steps += len(text) * len(s.known)
	cs := s.cursors[:0]
	for v, p := range s.known {
		if i := strings.Index(text, v); i >= 0 {
			cs = append(cs, knownCursor{v, p, i})
		}
	}
	s.cursors = cs
	var out []knownMatch
	for pos := 0; ; {
		best := -1
		for i := range cs {
			c := &cs[i]
			if c.next >= 0 && c.next < pos {
				c.next = indexFrom(text, c.value, pos)
			}
			if c.next < 0 {
				continue
			}
			if best < 0 || c.next < cs[best].next || c.next == cs[best].next && len(c.value) > len(cs[best].value) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		c := cs[best]
		out = append(out, knownMatch{span{c.next, c.next + len(c.value)}, c.placeholder})
		pos = c.next + len(c.value)
	}
}
