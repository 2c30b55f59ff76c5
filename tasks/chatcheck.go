package tasks

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/tollgate/provider"
)

// The checks of a chat request's fields, taken from OpenAI's own bounds:
// a request OpenAI would refuse is refused here, before anything is
// reserved or called, with the JSON path of every field at fault.

// Bounds of a chat request.
const (
	// MaxTools bounds the tools of one request, as OpenAI does.
	MaxTools = 128
	// MaxStop bounds the stop sequences.
	MaxStop = 4
	// MaxChoices bounds n.
	MaxChoices = 128
	// MaxTopLogprobs bounds top_logprobs.
	MaxTopLogprobs = 20
	// MaxBetas bounds the anthropic-beta values of one request.
	MaxBetas = 32
	// MinThinkingBudget is the smallest thinking budget Anthropic takes.
	MinThinkingBudget = 1024
	// MaxTopK bounds top_k: above any model's vocabulary, so it never
	// narrows sampling, and a figure every provider can read.
	MaxTopK = 1_000_000
)

// betaPattern is what an anthropic-beta value looks like
// ("interleaved-thinking-2025-05-14").
var betaPattern = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,100}$`)

// namePattern is what OpenAI accepts as a function or schema name.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// extraPattern is what a passthrough field may be named: OpenAI's names
// are snake case.
var extraPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// The values OpenAI accepts for its enumerations.
var (
	reasoningEfforts = set("none", "minimal", "low", "medium", "high", "xhigh", "max")
	verbosities      = set("low", "medium", "high")
	imageDetails     = set("", "auto", "low", "high")
	toolChoiceModes  = set(provider.ToolChoiceNone, provider.ToolChoiceAuto, provider.ToolChoiceRequired)
	formatTypes      = set(provider.FormatText, provider.FormatJSONObject, provider.FormatJSONSchema)
	cacheTTLs        = set("", "5m", "1h")
	thinkingTypes    = set(provider.ThinkingEnabled, provider.ThinkingAdaptive, provider.ThinkingDisabled)
	thinkingDisplays = set("", "summarized", "omitted")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// reserved are the names a passthrough field may not take: the fields of
// the chat request itself, and the OpenAI endpoint's own (stream, its
// options, metadata), which Tollgate sets or reads.
var reserved = func() map[string]bool {
	m := set("stream", "stream_options", "metadata")
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name != "" && name != "-" && name != "passthrough" {
				m[name] = true
			}
		}
	}
	walk(reflect.TypeFor[provider.Chat]())
	return m
}()

// chatCheck gathers the problems of one request.
type chatCheck struct {
	fe []FieldError
}

func (c *chatCheck) add(field, format string, args ...any) {
	c.fe = append(c.fe, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// checkChat returns every problem of the chat's fields, in the order of
// the request's JSON.
func checkChat(ch provider.Chat) []FieldError {
	var c chatCheck
	c.messages(ch.Messages)
	c.outputLimit(ch)
	c.tools(ch)
	c.responseFormat(ch.ResponseFormat)
	c.params(ch.Params)
	c.anthropic(ch)
	c.extra(ch.Extra)
	return c.fe
}

// anthropic checks Anthropic's own request fields: thinking, the
// request's cache_control, the anthropic-beta values.
func (c *chatCheck) anthropic(ch provider.Chat) {
	if ch.Thinking != nil {
		c.thinking(ch, ch.Thinking)
	}
	c.cacheControl("cache_control", ch.CacheControl)
	if v := ch.AnthropicVersion; v != "" {
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			c.add("anthropic_version", "must be a version date such as 2023-06-01")
		}
	}
	if len(ch.Betas) > MaxBetas {
		c.add("anthropic_beta", "must hold at most %d values", MaxBetas)
	}
	for i, b := range ch.Betas {
		if !betaPattern.MatchString(b) {
			c.add(fmt.Sprintf("anthropic_beta[%d]", i), "must be 1-100 letters, digits, dots, underscores or dashes")
		}
	}
	if k := ch.TopK; k != nil && (*k < 0 || *k > MaxTopK) {
		c.add("top_k", "must be between 0 and %d", MaxTopK)
	}
}

// thinking checks Anthropic's extended-thinking settings t of ch.
func (c *chatCheck) thinking(ch provider.Chat, t *provider.ThinkingConfig) {
	switch {
	case !thinkingTypes[t.Type]:
		c.add("thinking.type", "must be enabled, adaptive or disabled")
	case t.Type == provider.ThinkingEnabled && t.BudgetTokens < MinThinkingBudget:
		c.add("thinking.budget_tokens", "must be at least %d", MinThinkingBudget)
	case t.Type == provider.ThinkingEnabled && ch.OutputLimit() > 0 && t.BudgetTokens >= ch.OutputLimit():
		c.add("thinking.budget_tokens", "must be below max_tokens (%d)", ch.OutputLimit())
	case t.Type != provider.ThinkingEnabled && t.BudgetTokens != 0:
		c.add("thinking.budget_tokens", "is only allowed with type enabled")
	}
	switch {
	case !thinkingDisplays[t.Display]:
		c.add("thinking.display", "must be summarized or omitted")
	case t.Display != "" && t.Type == provider.ThinkingDisabled:
		c.add("thinking.display", "is not allowed with type disabled")
	}
	if t.Asks() && ch.ReasoningEffort != "" && ch.ReasoningEffort != "none" {
		c.add("thinking", "set either thinking or reasoning_effort, not both")
	}
}

// cacheControl checks a prompt-cache breakpoint, when given.
func (c *chatCheck) cacheControl(at string, cc *provider.CacheControl) {
	if cc == nil {
		return
	}
	if cc.Type != "ephemeral" {
		c.add(at+".type", `must be "ephemeral"`)
	}
	if !cacheTTLs[cc.TTL] {
		c.add(at+".ttl", "must be 5m or 1h")
	}
}

// messages checks each message in turn; its tool loop follows the rules
// of ToolLoop.
func (c *chatCheck) messages(msgs []provider.Message) {
	loop := ToolLoop{Report: func(field, problem string) { c.add(field, "%s", problem) }}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		loop.Begin(at, m)
		c.role(at, m)
		c.content(at, m)
		c.parts(at+".content", m.Role, m.Content.Parts)
		loop.Carriers(at, m)
		if m.IsError && m.Role != "tool" {
			c.add(at+".is_error", "only a tool message carries is_error")
		}
		if m.CacheControl != nil && m.Role != "tool" {
			c.add(at+".cache_control", "only a tool message carries cache_control; put it on a content part")
		}
		c.cacheControl(at+".cache_control", m.CacheControl)
		for j, tc := range m.ToolCalls {
			loop.Call(at, j, tc)
			c.cacheControl(fmt.Sprintf("%s.tool_calls[%d].cache_control", at, j), tc.CacheControl)
		}
		loop.Answer(at, m)
	}
	loop.End()
}

func (c *chatCheck) role(at string, m provider.Message) {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	default:
		c.add(at+".role", "must be system, developer, user, assistant or tool")
	}
}

// content checks that a message says something: an assistant message may
// instead carry tool calls or a refusal alone, and a tool result may be
// empty (a tool that returned nothing).
func (c *chatCheck) content(at string, m provider.Message) {
	switch {
	case m.Role == "assistant" && m.Content.IsZero() && (len(m.ToolCalls) > 0 || m.Refusal != ""):
	case m.Role == "tool" && m.Content.IsZero():
	case m.Content.IsZero():
		c.add(at+".content", "must not be empty")
	case m.Content.Parts != nil && len(m.Content.Parts) == 0:
		c.add(at+".content", "must hold at least one part")
	}
}

// parts checks a content's parts: text everywhere, images only from the
// user or a tool, thinking blocks only from the assistant, each field on
// the part type it belongs to.
func (c *chatCheck) parts(at, role string, parts []provider.Part) {
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		c.partFields(pat, p)
		switch p.Type {
		case provider.PartText:
			if p.ImageURL != nil {
				c.add(pat+".image_url", "belongs on a part of type image_url")
			}
			c.cacheControl(pat+".cache_control", p.CacheControl)
		case provider.PartThinking, provider.PartRedactedThinking:
			switch {
			case role != "assistant":
				c.add(pat+".type", "thinking blocks are only accepted on assistant messages")
			case p.Type == provider.PartThinking && p.Signature == "":
				c.add(pat+".signature", "must not be empty")
			case p.Type == provider.PartRedactedThinking && p.Data == "":
				c.add(pat+".data", "must not be empty")
			}
			if p.CacheControl != nil {
				c.add(pat+".cache_control", "is not allowed on a thinking block")
			}
		case provider.PartImage:
			if role != "user" && role != "tool" {
				c.add(pat+".type", "images are only accepted on user and tool messages")
			}
			c.cacheControl(pat+".cache_control", p.CacheControl)
			if p.Text != "" {
				c.add(pat+".text", "belongs on a part of type text")
			}
			if p.ImageURL == nil {
				c.add(pat+".image_url", "must be given on a part of type image_url")
				continue
			}
			if msg := imageURLProblem(p.ImageURL.URL); msg != "" {
				c.add(pat+".image_url.url", "%s", msg)
			}
			if !imageDetails[p.ImageURL.Detail] {
				c.add(pat+".image_url.detail", "must be auto, low or high")
			}
		default:
			c.add(pat+".type", "must be text, image_url, thinking or redacted_thinking")
		}
	}
}

// partFields checks that a part's thinking fields sit on a part of their
// type.
func (c *chatCheck) partFields(pat string, p provider.Part) {
	if p.Type != provider.PartThinking {
		if p.Thinking != "" {
			c.add(pat+".thinking", "belongs on a part of type thinking")
		}
		if p.Signature != "" {
			c.add(pat+".signature", "belongs on a part of type thinking")
		}
	}
	if p.Type != provider.PartRedactedThinking && p.Data != "" {
		c.add(pat+".data", "belongs on a part of type redacted_thinking")
	}
	if (p.Type == provider.PartThinking || p.Type == provider.PartRedactedThinking) && p.Text != "" {
		c.add(pat+".text", "belongs on a part of type text")
	}
}

// imageURLProblem says what is wrong with an image URL, or "": it must be
// an http(s) URL with a host, or a data URL of an image in valid base64.
func imageURLProblem(s string) string {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mediaType, enc, _ := strings.Cut(meta, ";")
		if !ok || enc != "base64" || !strings.HasPrefix(mediaType, "image/") || len(mediaType) == len("image/") {
			return "a data URL must be data:image/<type>;base64,<data>"
		}
		if _, err := base64.StdEncoding.DecodeString(data); err != nil || data == "" {
			return "the data URL's image is not valid base64"
		}
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http(s) URL or a data:image/...;base64 URL"
	}
	return ""
}

func (c *chatCheck) outputLimit(ch provider.Chat) {
	if ch.MaxCompletionTokens < 0 || ch.MaxCompletionTokens > MaxMaxTokens {
		c.add("max_completion_tokens", "must be between 1 and %d", MaxMaxTokens)
	}
	if ch.MaxTokens > 0 && ch.MaxCompletionTokens > 0 {
		c.add("max_completion_tokens", "set either max_tokens or max_completion_tokens, not both")
	}
}

func (c *chatCheck) tools(ch provider.Chat) {
	if len(ch.Tools) > MaxTools {
		c.add("tools", "must hold at most %d tools", MaxTools)
	}
	names := map[string]int{}
	for i, t := range ch.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			c.add(at+".type", `must be "function"`)
		}
		name := t.Function.Name
		switch j, dup := names[name]; {
		case !ValidToolName(name):
			c.add(at+".function.name", "must be 1-64 letters, digits, underscores or dashes")
		case dup:
			c.add(at+".function.name", "repeats the name of tools[%d]", j)
		default:
			names[name] = i
		}
		if t.Function.Parameters != nil {
			if msg := schemaProblem(t.Function.Parameters); msg != "" {
				c.add(at+".function.parameters", "%s", msg)
			}
		}
		c.cacheControl(at+".cache_control", t.CacheControl)
	}
	if tc := ch.ToolChoice; tc != nil {
		switch {
		case len(ch.Tools) == 0:
			c.add("tool_choice", "is only allowed with tools")
		case tc.Function != "":
			if _, ok := names[tc.Function]; !ok {
				c.add("tool_choice.function.name", "names no tool in tools")
			}
		case !ValidToolChoiceMode(tc.Mode):
			c.add("tool_choice", `must be "none", "auto", "required" or a named function`)
		}
	}
	if ch.ParallelToolCalls != nil && len(ch.Tools) == 0 {
		c.add("parallel_tool_calls", "is only allowed with tools")
	}
}

func (c *chatCheck) responseFormat(rf *provider.ResponseFormat) {
	if rf == nil {
		return
	}
	if !formatTypes[rf.Type] {
		c.add("response_format.type", "must be text, json_object or json_schema")
		return
	}
	switch {
	case rf.Type != provider.FormatJSONSchema && rf.JSONSchema != nil:
		c.add("response_format.json_schema", "is only allowed with type json_schema")
	case rf.Type == provider.FormatJSONSchema && rf.JSONSchema == nil:
		c.add("response_format.json_schema", "must be given with type json_schema")
	case rf.JSONSchema != nil:
		if !namePattern.MatchString(rf.JSONSchema.Name) {
			c.add("response_format.json_schema.name", "must be 1-64 letters, digits, underscores or dashes")
		}
		if rf.JSONSchema.Schema != nil {
			if msg := schemaProblem(rf.JSONSchema.Schema); msg != "" {
				c.add("response_format.json_schema.schema", "%s", msg)
			}
		}
	}
}

// params checks the sampling parameters, in the order of the request's
// JSON.
func (c *chatCheck) params(p provider.Params) {
	c.between("temperature", p.Temperature, 0, 2)
	c.between("top_p", p.TopP, 0, 1)
	c.between("presence_penalty", p.PresencePenalty, -2, 2)
	c.between("frequency_penalty", p.FrequencyPenalty, -2, 2)
	c.stop(p.Stop)
	c.logitBias(p.LogitBias)
	c.topLogprobs(p)
	if p.N < 0 || p.N > MaxChoices {
		c.add("n", "must be between 1 and %d", MaxChoices)
	}
	if p.ReasoningEffort != "" && !reasoningEfforts[p.ReasoningEffort] {
		c.add("reasoning_effort", "must be none, minimal, low, medium, high, xhigh or max")
	}
	if p.Verbosity != "" && !verbosities[p.Verbosity] {
		c.add("verbosity", "must be low, medium or high")
	}
}

// between checks that v, when given, lies within [lo, hi].
func (c *chatCheck) between(field string, v *float64, lo, hi float64) {
	if v != nil && (*v < lo || *v > hi) {
		c.add(field, "must be between %s and %s", strconv.FormatFloat(lo, 'g', -1, 64), strconv.FormatFloat(hi, 'g', -1, 64))
	}
}

func (c *chatCheck) stop(stop provider.Stop) {
	if len(stop) > MaxStop {
		c.add("stop", "must hold at most %d sequences", MaxStop)
	}
	for i, s := range stop {
		if s == "" {
			c.add(fmt.Sprintf("stop[%d]", i), "must not be empty")
		}
	}
}

// logitBias checks the biases in the order of their token ids as text.
func (c *chatCheck) logitBias(bias map[string]int) {
	for _, tok := range slices.Sorted(maps.Keys(bias)) {
		at := "logit_bias[" + strconv.Quote(tok) + "]"
		if id, err := strconv.ParseUint(tok, 10, 32); err != nil || strconv.FormatUint(id, 10) != tok {
			c.add(at, "must be keyed by token ids (whole numbers)")
		}
		if v := bias[tok]; v < -100 || v > 100 {
			c.add(at, "must be between -100 and 100")
		}
	}
}

func (c *chatCheck) topLogprobs(p provider.Params) {
	if p.TopLogprobs == nil {
		return
	}
	switch {
	case *p.TopLogprobs < 0 || *p.TopLogprobs > MaxTopLogprobs:
		c.add("top_logprobs", "must be between 0 and %d", MaxTopLogprobs)
	case p.Logprobs == nil || !*p.Logprobs:
		c.add("top_logprobs", "requires logprobs: true")
	}
}

func (c *chatCheck) extra(extra map[string]json.RawMessage) {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		at := "passthrough[" + strconv.Quote(k) + "]"
		if extraPattern.MatchString(k) {
			at = "passthrough." + k
		}
		switch {
		case k == "metadata" && extra["store"] != nil:
			// OpenAI's metadata tags a stored completion: it passes
			// with store, and only then means anything to the provider.
			if !json.Valid(extra[k]) {
				c.add(at, "must be a JSON value")
			}
		case reserved[k]:
			c.add(at, "is a field of the request itself; set it there")
		case !extraPattern.MatchString(k):
			c.add(at, "must be named in lower snake case, as OpenAI's fields are")
		case !json.Valid(extra[k]):
			c.add(at, "must be a JSON value")
		}
	}
}

// refuseLoader loads nothing: a schema in a request may refer only to
// itself and to the JSON Schema meta-schemas, never to a file or a URL.
type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) {
	return nil, errors.New("schemas may only refer to themselves")
}

// schemaProblem says why raw is not a JSON Schema (an object or a
// boolean that compiles), or "".
func schemaProblem(raw json.RawMessage) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "must be a JSON Schema"
	}
	if _, ok := doc.(map[string]any); !ok {
		return "must be a JSON Schema object"
	}
	comp := jsonschema.NewCompiler()
	comp.UseLoader(refuseLoader{})
	comp.DefaultDraft(jsonschema.Draft2020)
	const loc = "tollgate:///schema.json"
	if err := comp.AddResource(loc, doc); err != nil {
		return "is not a valid JSON Schema"
	}
	if _, err := comp.Compile(loc); err != nil {
		return "is not a valid JSON Schema: " + schemaReason(err)
	}
	return ""
}

// schemaReason says where the schema breaks the meta-schema, as a JSON
// pointer into it; it never quotes a value of the request.
func schemaReason(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return "a reference, pattern or keyword does not resolve"
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := "/" + strings.Join(ve.InstanceLocation, "/")
	if len(loc) > 200 {
		loc = strings.ToValidUTF8(loc[:200], "") + "…"
	}
	return "at " + loc
}
