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

func compile(cat *catalog.Catalog, rc catalog.RouteConfig) (*Route, error) {
	r := &Route{Name: rc.Name, PromptVersion: rc.PromptVersion, SystemPrompt: rc.SystemPrompt, UserTemplate: rc.UserTemplate,
		Input: rc.Input, Model: rc.Model, MaxTokens: rc.MaxTokens, Deadline: time.Duration(rc.DeadlineMS) * time.Millisecond,
		MaxRetries: rc.MaxRetries, OnFailure: rc.OnFailure, Fallback: rc.Fallback, DailyCalls: rc.Guards.DailyCalls}
	switch {
	case !nameFormat.MatchString(r.Name):
		return nil, errors.New("name: must be 1-63 lowercase letters, digits or '-'")
	case r.PromptVersion == "":
		return nil, errors.New("prompt_version: required")
	case strings.TrimSpace(r.SystemPrompt) == "":
		return nil, errors.New("system_prompt: required")
	case r.MaxTokens < 1 || r.MaxTokens > 100_000:
		return nil, errors.New("max_tokens: must be 1-100000")
	case rc.DeadlineMS < 100 || rc.DeadlineMS > 600_000:
		return nil, errors.New("deadline_ms: must be 100-600000")
	case r.MaxRetries < 0 || r.MaxRetries > 5:
		return nil, errors.New("max_retries: must be 0-5")
	case r.OnFailure != "fallback" && r.OnFailure != "error":
		return nil, errors.New("on_failure: must be fallback or error")
	case rc.Guards.DailyCalls < 0 || rc.Guards.DailyCalls > maxGuardCount:
		return nil, fmt.Errorf("guards.daily_calls: must be 0-%d", maxGuardCount)
	}
	model, _, err := cat.Resolve(r.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if rl := rc.Guards.RateLimit; rl != nil {
		if rl.Requests < 1 || rl.WindowS < 1 || rl.Requests > maxGuardCount || rl.WindowS > maxGuardWindowS {
			return nil, fmt.Errorf("guards.rate_limit: requests must be 1-%d and window_s 1-%d", maxGuardCount, maxGuardWindowS)
		}
		r.RateRequests, r.RateWindow = rl.Requests, time.Duration(rl.WindowS)*time.Second
	}
	fields := map[string]bool{}
	for j, f := range rc.Input {
		switch {
		case !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(f.Name) || fields[f.Name]:
			return nil, fmt.Errorf("input[%d].name: must be a unique identifier", j)
		case f.Type != "string" && f.Type != "integer" && f.Type != "number" && f.Type != "boolean":
			return nil, fmt.Errorf("input[%d].type: must be string, integer, number or boolean", j)
		case f.MinLength < 0 || (f.MaxLength != 0 && f.MaxLength < f.MinLength):
			return nil, fmt.Errorf("input[%d]: min_length and max_length are inconsistent", j)
		}
		fields[f.Name] = true
	}
	if r.UserTemplate == "" {
		return nil, errors.New("user_template: required")
	}
	for _, m := range placeholder.FindAllStringSubmatch(r.UserTemplate, -1) {
		if !fields[m[1]] {
			return nil, fmt.Errorf("user_template: {{%s}} is not an input field", m[1])
		}
	}
	switch rc.Output.Type {
	case "text":
		if rc.Output.MaxLength < 1 {
			return nil, errors.New("output.max_length: required for text output")
		}
		r.MaxLength = rc.Output.MaxLength
	case "json":
		r.OutputJSON, r.MaxLength = true, rc.Output.MaxLength
		if r.MaxLength == 0 {
			r.MaxLength = 64 << 10
		}
		raw, err := json.Marshal(rc.Output.Schema)
		if err != nil || len(rc.Output.Schema) == 0 {
			return nil, errors.New("output.schema: required for json output")
		}
		r.schema = &openapi3.Schema{}
		if err := r.schema.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("output.schema: %w", err)
		}
		if err := r.schema.Validate(context.Background()); err != nil {
			return nil, fmt.Errorf("output.schema: %w", err)
		}
	default:
		return nil, errors.New("output.type: must be text or json")
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
	var fe []FieldError
	clean = map[string]any{}
	known := map[string]bool{}
	for _, f := range r.Input {
		known[f.Name] = true
		v, present := input[f.Name]
		required := f.Required == nil || *f.Required
		if !present || v == nil {
			if required {
				fe = append(fe, FieldError{"input." + f.Name, "is required"})
			}
			continue
		}
		switch f.Type {
		case "string":
			s, ok := v.(string)
			if !ok {
				fe = append(fe, FieldError{"input." + f.Name, "must be a string"})
				continue
			}
			if f.Trim {
				s = strings.TrimSpace(s)
			}
			n := utf8.RuneCountInString(s)
			if n < max(f.MinLength, 0) || (f.MaxLength > 0 && n > f.MaxLength) {
				fe = append(fe, FieldError{"input." + f.Name, fmt.Sprintf("must be %d-%d characters", f.MinLength, f.MaxLength)})
				continue
			}
			clean[f.Name] = s
		case "integer", "number":
			n, ok := number(v)
			if !ok || (f.Type == "integer" && n != math.Trunc(n)) {
				fe = append(fe, FieldError{"input." + f.Name, "must be a " + f.Type})
				continue
			}
			if (f.Min != nil && n < *f.Min) || (f.Max != nil && n > *f.Max) {
				fe = append(fe, FieldError{"input." + f.Name, "is out of range"})
				continue
			}
			clean[f.Name] = v
		case "boolean":
			if _, ok := v.(bool); !ok {
				fe = append(fe, FieldError{"input." + f.Name, "must be a boolean"})
				continue
			}
			clean[f.Name] = v
		}
	}
	for k := range input {
		if !known[k] {
			fe = append(fe, FieldError{"input." + k, "is not a field of this route"})
		}
	}
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
