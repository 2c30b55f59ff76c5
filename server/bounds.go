package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/limits"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// The ranges the API documents for its numeric fields (openapi.yaml,
// docs/api.md), checked by scanJSON against the literal the client sent.
// The literal, not the decoded Go value: a Go int cannot hold 1e30 or
// 1.5, and an omitted max_tokens and an explicit 0 decode alike, so a
// check after decoding would either speak of Go's int64 range or take the
// 0 for "use the default". Every numeric field of every body has an entry
// (TestEveryNumericFieldHasABound); the domain checks (tasks.Validate,
// budget, limits, accounts) still hold the same bounds for callers that
// are not HTTP bodies.

// bound is the closed range [lo, hi] of a field's numbers; whole: only
// whole numbers.
type bound struct {
	lo, hi *big.Rat
	whole  bool
	unit   string // after the range, e.g. " seconds"
}

// whole is a bound on an integer field.
func whole(lo, hi int64) *bound {
	return &bound{lo: new(big.Rat).SetInt64(lo), hi: new(big.Rat).SetInt64(hi), whole: true}
}

// decimal is a bound on a number field.
func decimal(lo, hi float64) *bound {
	return &bound{lo: new(big.Rat).SetFloat64(lo), hi: new(big.Rat).SetFloat64(hi)}
}

func (b *bound) in(unit string) *bound { c := *b; c.unit = unit; return &c }

// holds reports whether r lies within b.
func (b *bound) holds(r *big.Rat) bool {
	return (!b.whole || r.IsInt()) && r.Cmp(b.lo) >= 0 && r.Cmp(b.hi) <= 0
}

// text is the range as the API documents it: "between 1 and 1000000".
func (b *bound) text() string {
	return "between " + ratText(b.lo) + " and " + ratText(b.hi) + b.unit
}

func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// kindText is the range with what the value must be: "a whole number
// between 1 and 1000000".
func (b *bound) kindText() string {
	if b.whole {
		return "a whole number " + b.text()
	}
	return "a number " + b.text()
}

// err is the 400 for a value at path outside b; inKind: the value is a
// number of the right kind (whole where b is), only out of the range.
func (b *bound) err(path string, inKind bool) error {
	if inKind {
		return boundErr(path, "must be "+b.text())
	}
	return boundErr(path, "must be "+b.kindText())
}

// kindErr is the 400 for a value at path that is not a number at all
// (tok: a string, a boolean, or an array or object opening).
func (b *bound) kindErr(path string, tok json.Token) error {
	msg := "must be " + b.kindText()
	if str, ok := tok.(string); ok {
		msg += ", not a string"
		if word := nonNumberWord(str); word != "" {
			msg += " (" + nonNumberSays(word) + ")"
		}
	}
	return boundErr(path, msg)
}

// boundErr is the 400 naming the field and its range: "max_tokens must be
// between 1 and 1000000."
func boundErr(path, msg string) error {
	return badRequest(fmt.Sprintf("%s %s.", path, msg), tasks.FieldError{Field: path, Message: msg})
}

// nonNumber is a NaN or an Infinity where a JSON value belongs: JSON has
// neither, but JavaScript's and Python's encoders write them.
type nonNumber struct{ word string }

func (e *nonNumber) Error() string { return e.word + " is not a JSON number" }

// at is the 400 for the non-number at path, in a field bounded by b (nil
// for a free-form value).
func (e *nonNumber) at(path string, b *bound) error {
	if b != nil {
		return boundErr(path, "must be "+b.kindText()+" ("+nonNumberSays(e.word)+")")
	}
	return boundErr(cmp.Or(path, "body"), "must be a finite JSON number ("+nonNumberSays(e.word)+")")
}

func nonNumberSays(word string) string {
	if word == "NaN" {
		return "NaN is not a number"
	}
	return word + " is not a finite number"
}

// nonNumberAt reports the non-number raw starts with, after the
// separators before a value: "NaN", "Infinity", "-Infinity", or "".
func nonNumberAt(raw []byte) string {
	raw = []byte(strings.TrimLeft(string(raw[:min(len(raw), 64)]), " \t\r\n:,"))
	end := 0
	for end < len(raw) && (raw[end] == '+' || raw[end] == '-' || raw[end] >= 'a' && raw[end] <= 'z' || raw[end] >= 'A' && raw[end] <= 'Z') {
		end++
	}
	return nonNumberWord(string(raw[:end]))
}

// nonNumberWord names s when it spells NaN or an infinity, as the
// encoders of other languages write them, else "".
func nonNumberWord(s string) string {
	sign := ""
	if s != "" && (s[0] == '-' || s[0] == '+') {
		sign, s = s[:1], s[1:]
	}
	switch strings.ToLower(s) {
	case "nan":
		return "NaN"
	case "inf", "infinity":
		if sign == "-" {
			return "-Infinity"
		}
		return "Infinity"
	}
	return ""
}

// numeric reports whether t (pointers taken off) holds a JSON number.
func numeric(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// fieldKey names a field by the struct that declares it and its JSON name.
type fieldKey struct {
	owner reflect.Type
	name  string
}

// boundOf is the documented range of f's numbers, or nil.
func boundOf(f jsonField) *bound { return fieldBounds[fieldKey{f.owner, f.name}] }

var (
	maxTokensBound   = whole(1, tasks.MaxMaxTokens)
	temperatureBound = decimal(0, 2)
	topPBound        = decimal(0, 1)
	topKBound        = whole(0, tasks.MaxTopK)
	penaltyBound     = decimal(-2, 2)
	retentionBound   = whole(1, accounts.MaxRetentionDays).in(" days")
	perMinuteBound   = whole(0, limits.MaxPerMinute)
)

// fieldBounds is every numeric field of every request body, with the
// range openapi.yaml documents for it. A map or an array of numbers is
// bounded per element.
var fieldBounds = map[fieldKey]*bound{
	// The chat request: POST /v1/tasks, /v1/chat/completions, route calls.
	{reflect.TypeFor[provider.Chat](), "max_tokens"}:            maxTokensBound,
	{reflect.TypeFor[provider.Chat](), "max_completion_tokens"}: maxTokensBound,
	{reflect.TypeFor[provider.Params](), "temperature"}:         temperatureBound,
	{reflect.TypeFor[provider.Params](), "top_p"}:               topPBound,
	// OpenAI documents seed over the whole of int64.
	{reflect.TypeFor[provider.Params](), "seed"}:              whole(math.MinInt64, math.MaxInt64),
	{reflect.TypeFor[provider.Params](), "presence_penalty"}:  penaltyBound,
	{reflect.TypeFor[provider.Params](), "frequency_penalty"}: penaltyBound,
	{reflect.TypeFor[provider.Params](), "logit_bias"}:        whole(-100, 100),
	{reflect.TypeFor[provider.Params](), "top_logprobs"}:      whole(0, tasks.MaxTopLogprobs),
	{reflect.TypeFor[provider.Params](), "n"}:                 whole(1, tasks.MaxChoices),
	{reflect.TypeFor[provider.Params](), "top_k"}:             topKBound,
	// Below max_tokens, itself at most MaxMaxTokens (tasks.Validate).
	{reflect.TypeFor[provider.ThinkingConfig](), "budget_tokens"}: whole(tasks.MinThinkingBudget, tasks.MaxMaxTokens-1),
	{reflect.TypeFor[provider.Embedding](), "dimensions"}:         whole(1, provider.MaxEmbeddingDimensions),
	{reflect.TypeFor[tasks.Request](), "deadline_s"}:              whole(1, tasks.MaxDeadlineS).in(" seconds"),

	// POST /v1/messages: Anthropic's ranges.
	{reflect.TypeFor[anthropicwire.Request](), "max_tokens"}:  maxTokensBound,
	{reflect.TypeFor[anthropicwire.Request](), "temperature"}: decimal(0, 1),
	{reflect.TypeFor[anthropicwire.Request](), "top_p"}:       topPBound,
	{reflect.TypeFor[anthropicwire.Request](), "top_k"}:       topKBound,

	// POST /v1/responses.
	{reflect.TypeFor[respRequest](), "max_output_tokens"}: maxTokensBound,
	{reflect.TypeFor[respRequest](), "temperature"}:       temperatureBound,
	{reflect.TypeFor[respRequest](), "top_p"}:             topPBound,

	// POST /v1/embeddings.
	{reflect.TypeFor[oaiEmbeddingRequest](), "dimensions"}: whole(1, provider.MaxEmbeddingDimensions),

	// The admin bodies.
	{reflect.TypeFor[limitInput](), "total_micros"}:              whole(0, budget.MaxTotalMicros),
	{reflect.TypeFor[topupInput](), "amount_micros"}:             whole(1, budget.MaxTotalMicros),
	{reflect.TypeFor[limitsInput](), "requests_per_minute"}:      perMinuteBound,
	{reflect.TypeFor[limitsInput](), "tokens_per_minute"}:        perMinuteBound,
	{reflect.TypeFor[limitsWindow](), "requests_per_minute"}:     perMinuteBound,
	{reflect.TypeFor[limitsWindow](), "tokens_per_minute"}:       perMinuteBound,
	{reflect.TypeFor[privacyInput](), "body_retention_days"}:     retentionBound,
	{reflect.TypeFor[privacyInput](), "metadata_retention_days"}: retentionBound,
}
