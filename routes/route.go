// Package routes owns routes: named, versioned prompts that product teams
// call like any endpoint ("draft a support reply") and that always answer
// something renderable. A route validates its input before anything is
// spent, renders its prompt, runs as an ordinary task (idempotent,
// budgeted, replayable), and puts the answer through an output guard; on
// failure it answers, per its configuration, with a same-shape fallback
// that says which guard substituted it and why, or with a stable error.
//
// Definitions come from the catalog file and are compiled once at start-up;
// an invalid route fails start-up with a message naming the route and the
// field. The per-user guards (requests per window, calls per UTC day) and
// the last-good-answer cache live in PostgreSQL, so every instance shares
// them.
package routes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/catalog"
)

// Bounds of a route's guards, so that counting stays in range: the counts
// are compared with an integer column, so a limit must fit one, and a
// window becomes a time.Duration, so at most a year (366 days) keeps it
// far inside that type's range. A route beyond either bound is refused,
// naming the route and the field.
const (
	maxGuardCount   = 1_000_000_000
	maxGuardWindowS = 366 * 24 * 3600
)

// Route is a compiled route.
type Route struct {
	Name          string
	PromptVersion string
	SystemPrompt  string
	UserTemplate  string
	Input         []catalog.InputField
	Model         string
	MaxTokens     int
	Deadline      time.Duration
	MaxRetries    int
	OutputJSON    bool
	MaxLength     int
	schema        *openapi3.Schema
	Fallback      any
	OnFailure     string // "fallback" or "error"
	RateRequests  int
	RateWindow    time.Duration
	DailyCalls    int
	// chat is what the route fixes of every call besides its messages:
	// tools, tool choice, response_format and sampling.
	chat chat
}

var nameFormat = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Compile validates and compiles the catalog's routes. Its error names the
// route and the field at fault.
func Compile(cat *catalog.Catalog) (map[string]*Route, error) {
	out := map[string]*Route{}
	for i, rc := range cat.Routes {
		r, err := compile(cat, rc)
		if err != nil {
			return nil, fmt.Errorf("routes: routes[%d] (%q): %w", i, rc.Name, err)
		}
		if out[r.Name] != nil {
			return nil, fmt.Errorf("routes: routes[%d] (%q): name: duplicate", i, rc.Name)
		}
		out[r.Name] = r
	}
	return out, nil
}

// compile validates one route and compiles it, phase by phase: its
// settings, its model, its guards, its input and template, its output
// contract, what it fixes of the call, and its fallback.
func compile(cat *catalog.Catalog, rc catalog.RouteConfig) (*Route, error) {
	r := &Route{Name: rc.Name, PromptVersion: rc.PromptVersion, SystemPrompt: rc.SystemPrompt, UserTemplate: rc.UserTemplate,
		Input: rc.Input, Model: rc.Model, MaxTokens: rc.MaxTokens, Deadline: time.Duration(rc.DeadlineMS) * time.Millisecond,
		MaxRetries: rc.MaxRetries, OnFailure: rc.OnFailure, Fallback: rc.Fallback, DailyCalls: rc.Guards.DailyCalls}
	if err := checkSettings(rc); err != nil {
		return nil, err
	}
	model, _, err := cat.Resolve(r.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if r.RateRequests, r.RateWindow, err = rateLimit(rc.Guards); err != nil {
		return nil, err
	}
	if err := checkTemplate(r.UserTemplate, rc.Input); err != nil {
		return nil, err
	}
	if err := r.compileOutput(rc.Output); err != nil {
		return nil, err
	}
	var outputSchema map[string]any
	if r.OutputJSON {
		outputSchema = rc.Output.Schema
	}
	if r.chat, err = compileChat(cat.Chain(model), rc, outputSchema); err != nil {
		return nil, err
	}
	if r.Fallback == nil {
		return nil, errors.New("fallback: required, of the same shape as a success")
	}
	if err := r.checkShape(normalise(r.Fallback)); err != nil {
		return nil, fmt.Errorf("fallback: not the same shape as a success: %w", err)
	}
	r.Fallback = normalise(r.Fallback)
	return r, nil
}

// checkSettings refuses the first of a route's scalar settings out of its
// range, in the order of the table.
func checkSettings(rc catalog.RouteConfig) error {
	for _, c := range []struct {
		bad     bool
		problem string
	}{
		{!nameFormat.MatchString(rc.Name), "name: must be 1-63 lowercase letters, digits or '-'"},
		{rc.PromptVersion == "", "prompt_version: required"},
		{strings.TrimSpace(rc.SystemPrompt) == "", "system_prompt: required"},
		{rc.MaxTokens < 1 || rc.MaxTokens > 100_000, "max_tokens: must be 1-100000"},
		{rc.DeadlineMS < 100 || rc.DeadlineMS > 600_000, "deadline_ms: must be 100-600000"},
		{rc.MaxRetries < 0 || rc.MaxRetries > 5, "max_retries: must be 0-5"},
		{rc.OnFailure != "fallback" && rc.OnFailure != "error", "on_failure: must be fallback or error"},
		{rc.Guards.DailyCalls < 0 || rc.Guards.DailyCalls > maxGuardCount, fmt.Sprintf("guards.daily_calls: must be 0-%d", maxGuardCount)},
	} {
		if c.bad {
			return errors.New(c.problem)
		}
	}
	return nil
}

// rateLimit is a route's per-user window, none without one.
func rateLimit(g catalog.RouteGuards) (int, time.Duration, error) {
	rl := g.RateLimit
	if rl == nil {
		return 0, 0, nil
	}
	if rl.Requests < 1 || rl.WindowS < 1 || rl.Requests > maxGuardCount || rl.WindowS > maxGuardWindowS {
		return 0, 0, fmt.Errorf("guards.rate_limit: requests must be 1-%d and window_s 1-%d", maxGuardCount, maxGuardWindowS)
	}
	return rl.Requests, time.Duration(rl.WindowS) * time.Second, nil
}

var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkTemplate refuses a bad input field, a missing template and a
// placeholder that names no field.
func checkTemplate(template string, input []catalog.InputField) error {
	fields := map[string]bool{}
	for j, f := range input {
		switch {
		case !fieldName.MatchString(f.Name) || fields[f.Name]:
			return fmt.Errorf("input[%d].name: must be a unique identifier", j)
		case f.Type != "string" && f.Type != "integer" && f.Type != "number" && f.Type != "boolean":
			return fmt.Errorf("input[%d].type: must be string, integer, number or boolean", j)
		case f.MinLength < 0 || (f.MaxLength != 0 && f.MaxLength < f.MinLength):
			return fmt.Errorf("input[%d]: min_length and max_length are inconsistent", j)
		}
		fields[f.Name] = true
	}
	if template == "" {
		return errors.New("user_template: required")
	}
	for _, m := range placeholder.FindAllStringSubmatch(template, -1) {
		if !fields[m[1]] {
			return fmt.Errorf("user_template: {{%s}} is not an input field", m[1])
		}
	}
	return nil
}

// compileOutput sets r's output contract: text of a bounded length, or
// JSON valid against a schema (64 KiB unless bounded otherwise).
func (r *Route) compileOutput(o catalog.RouteOutput) error {
	switch o.Type {
	case "text":
		if o.MaxLength < 1 {
			return errors.New("output.max_length: required for text output")
		}
		r.MaxLength = o.MaxLength
		return nil
	case "json":
		r.OutputJSON, r.MaxLength = true, o.MaxLength
		if r.MaxLength == 0 {
			r.MaxLength = 64 << 10
		}
		var err error
		r.schema, err = compileSchema(o.Schema)
		return err
	}
	return errors.New("output.type: must be text or json")
}

// compileSchema is the output guard's schema of a JSON route.
func compileSchema(schema map[string]any) (*openapi3.Schema, error) {
	raw, err := json.Marshal(schema)
	if err != nil || len(schema) == 0 {
		return nil, errors.New("output.schema: required for json output")
	}
	s := &openapi3.Schema{}
	if err := s.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("output.schema: %w", err)
	}
	if err := s.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("output.schema: %w", err)
	}
	return s, nil
}

// normalise turns YAML-decoded values into their JSON form, so a fallback
// validates and encodes like a model's answer.
func normalise(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// checkShape validates a success value against the output contract.
func (r *Route) checkShape(v any) error {
	if !r.OutputJSON {
		s, ok := v.(string)
		switch {
		case !ok:
			return errors.New("must be a string")
		case strings.TrimSpace(s) == "":
			return errEmpty
		case utf8.RuneCountInString(s) > r.MaxLength:
			return fmt.Errorf("%w: longer than %d characters", errTooLong, r.MaxLength)
		}
		return nil
	}
	return r.schema.VisitJSON(v, openapi3.MultiErrors())
}

var (
	errEmpty   = errors.New("empty")
	errTooLong = errors.New("too long")
)

// FieldError names one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// InputError lists every problem with a route's input.
type InputError struct{ Fields []FieldError }

func (e *InputError) Error() string {
	return fmt.Sprintf("routes: invalid input (%d fields)", len(e.Fields))
}

// Prompt validates the input (trimming and limiting strings as the route
// says) and renders the route's messages. It returns an *InputError for bad
// input: nothing has been spent.
func (r *Route) Prompt(input map[string]any) (system, user string, clean map[string]any, err error) {
	clean, fe := r.clean(input)
	if fe != nil {
		return "", "", nil, &InputError{Fields: fe}
	}
	user = placeholder.ReplaceAllStringFunc(r.UserTemplate, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		if v, ok := clean[name]; ok {
			return fmt.Sprint(v)
		}
		return ""
	})
	return r.SystemPrompt, user, clean, nil
}

// clean checks every field of input against r's fields and returns the
// values that passed, or every problem found: a missing required field, a
// value its field refuses, a key that is no field.
func (r *Route) clean(input map[string]any) (map[string]any, []FieldError) {
	var fe []FieldError
	clean := map[string]any{}
	known := map[string]bool{}
	for _, f := range r.Input {
		known[f.Name] = true
		v, present := input[f.Name]
		if !present || v == nil {
			if f.Required == nil || *f.Required {
				fe = append(fe, FieldError{"input." + f.Name, "is required"})
			}
			continue
		}
		check := fieldCheck(f.Type)
		if check == nil {
			continue // compile admits no other type
		}
		c, problem := check(f, v)
		if problem != "" {
			fe = append(fe, FieldError{"input." + f.Name, problem})
			continue
		}
		clean[f.Name] = c
	}
	for k := range input {
		if !known[k] {
			fe = append(fe, FieldError{"input." + k, "is not a field of this route"})
		}
	}
	return clean, fe
}

// fieldCheck is the check of an input type: it returns the clean value,
// or the problem with v.
func fieldCheck(typ string) func(f catalog.InputField, v any) (any, string) {
	switch typ {
	case "string":
		return checkString
	case "integer", "number":
		return checkNumber
	case "boolean":
		return checkBoolean
	}
	return nil
}

func checkString(f catalog.InputField, v any) (any, string) {
	s, ok := v.(string)
	if !ok {
		return nil, "must be a string"
	}
	if f.Trim {
		s = strings.TrimSpace(s)
	}
	n := utf8.RuneCountInString(s)
	if n < max(f.MinLength, 0) || (f.MaxLength > 0 && n > f.MaxLength) {
		return nil, fmt.Sprintf("must be %d-%d characters", f.MinLength, f.MaxLength)
	}
	return s, ""
}

func checkNumber(f catalog.InputField, v any) (any, string) {
	n, ok := number(v)
	if !ok || (f.Type == "integer" && n != math.Trunc(n)) {
		return nil, "must be a " + f.Type
	}
	if (f.Min != nil && n < *f.Min) || (f.Max != nil && n > *f.Max) {
		return nil, "is out of range"
	}
	return v, ""
}

func checkBoolean(_ catalog.InputField, v any) (any, string) {
	if _, ok := v.(bool); !ok {
		return nil, "must be a boolean"
	}
	return v, ""
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// Output is the output guard: it reads the model's answer (already
// unwrapped from the provider's envelope by the adapter) as the route's
// contract says, and returns the value or why it was refused: "empty_response"
// or "schema_invalid".
func (r *Route) Output(text string) (any, string, error) {
	if strings.TrimSpace(text) == "" {
		return nil, ReasonEmpty, errEmpty
	}
	if !r.OutputJSON {
		if err := r.checkShape(text); err != nil {
			return nil, ReasonSchema, err
		}
		return text, "", nil
	}
	var v any
	if err := json.Unmarshal([]byte(stripFence(text)), &v); err != nil {
		return nil, ReasonSchema, fmt.Errorf("not JSON: %w", err)
	}
	if err := r.checkShape(v); err != nil {
		return nil, ReasonSchema, err
	}
	return v, "", nil
}

// stripFence removes a Markdown code fence models like to wrap JSON in.
func stripFence(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	return strings.TrimSpace(s)
}

// Guards and fallback reasons: closed sets, used as metric labels.
const (
	GuardBudget = "budget"
	GuardCall   = "call"
	GuardOutput = "output"

	ReasonRateLimited    = "rate_limited"
	ReasonBudget         = "budget_exceeded"
	ReasonCircuitOpen    = "circuit_open"
	ReasonTimeout        = "timeout"
	ReasonProviderError  = "provider_error"
	ReasonSchema         = "schema_invalid"
	ReasonEmpty          = "empty_response"
	ReasonModeration     = "moderation_blocked"
	ReasonApplicationErr = "application_failure"
	ReasonOverloaded     = "overloaded"
)
