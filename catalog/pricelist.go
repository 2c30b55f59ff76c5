package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/budget"
)

// PriceList is a list of model prices and capabilities kept by others, in
// the format of LiteLLM's model_prices_and_context_window.json: an object
// keyed by model name ("gpt-4o", "anthropic/claude-…",
// "cloudflare/@cf/meta/…"), each entry with costs in dollars a token and
// the model's limits and capabilities. Entries for what Tollgate does not
// serve (images, audio, rerank…) are read and checked, then left out.
type PriceList struct {
	models map[string]Listed
	keys   []string // sorted: the candidates of a close match
}

// Listed is one model of a price list, prices in micros per million
// tokens. A nil price or a zero limit is not given by the list.
type Listed struct {
	Key                                               string
	Provider                                          string // litellm_provider: openai, anthropic, cloudflare, …
	Kind                                              string // KindChat or KindEmbedding
	Input, Output, CachedInput, CacheWrite, Reasoning *int64
	ContextWindow, MaxOutputTokens                    int
	Tools, Vision, JSONSchema, ReasoningModel         bool
}

// listSpecKey is the entry of LiteLLM's file that documents the format.
const listSpecKey = "sample_spec"

// LoadPriceList reads and checks a price list file. It returns an error
// naming the model and field of the first value it cannot take, a cost
// that is not a whole number of micros per million tokens among them.
func LoadPriceList(path string) (*PriceList, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price list: %w", err)
	}
	return ParsePriceList(raw)
}

// ParsePriceList is LoadPriceList for bytes already read.
func ParsePriceList(raw []byte) (*PriceList, error) {
	if !utf8.Valid(raw) {
		// encoding/json would read invalid bytes as U+FFFD, making two
		// names one.
		return nil, errors.New("price list: the file is not valid UTF-8")
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("price list: want a JSON object keyed by model name: %w", err)
	}
	if dec.More() {
		return nil, errors.New("price list: text after the JSON object")
	}
	if top == nil {
		return nil, errors.New("price list: want a JSON object keyed by model name, not null")
	}
	if path, key, found, err := duplicateKey(raw); err != nil || found {
		if err != nil {
			return nil, fmt.Errorf("price list: want a JSON object keyed by model name: %w", err)
		}
		return nil, duplicateError(path, key)
	}
	l := &PriceList{models: map[string]Listed{}}
	// In name order, so that a file with several faults names the same
	// one each time.
	for _, key := range slices.Sorted(maps.Keys(top)) {
		rawEntry := top[key]
		if key == listSpecKey {
			continue
		}
		if err := CheckModelName(key); err != nil {
			return nil, fmt.Errorf("price list: model %q: %w", key, err)
		}
		m, serves, err := parseListed(key, rawEntry)
		if err != nil {
			return nil, fmt.Errorf("price list: model %q: %w", key, err)
		}
		if serves {
			l.models[key] = m
			l.keys = append(l.keys, key)
		}
	}
	slices.Sort(l.keys)
	return l, nil
}

// Len is the number of models the list gives Tollgate.
func (l *PriceList) Len() int { return len(l.models) }

// Lookup returns the entry named key exactly.
func (l *PriceList) Lookup(key string) (Listed, bool) {
	m, ok := l.models[key]
	return m, ok
}

// find returns the entry for name as a provider of the given kind knows
// it: under the provider's prefix ("anthropic/claude-…") or bare.
func (l *PriceList) find(name, kind string) (Listed, bool) {
	if kind != "" {
		if m, ok := l.models[kind+"/"+name]; ok {
			return m, true
		}
	}
	m, ok := l.models[name]
	return m, ok
}

// parseListed reads one entry. serves is false for a mode Tollgate does
// not serve.
func parseListed(key string, raw json.RawMessage) (m Listed, serves bool, err error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return m, false, errors.New("want an object")
	}
	if err := checkSpelling(fields); err != nil {
		return m, false, err
	}
	m.Key = key
	costs := []struct {
		name string
		dst  **int64
	}{
		{"input_cost_per_token", &m.Input}, {"output_cost_per_token", &m.Output},
		{"cache_read_input_token_cost", &m.CachedInput}, {"cache_creation_input_token_cost", &m.CacheWrite},
		{"output_cost_per_reasoning_token", &m.Reasoning},
	}
	for _, c := range costs {
		if *c.dst, err = listCost(fields[c.name]); err != nil {
			return m, false, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if err := m.readLimits(fields); err != nil {
		return m, false, err
	}
	flags := []struct {
		name string
		dst  *bool
	}{
		{"supports_function_calling", &m.Tools}, {"supports_vision", &m.Vision},
		{"supports_response_schema", &m.JSONSchema}, {"supports_reasoning", &m.ReasoningModel},
	}
	for _, f := range flags {
		if v := fields[f.name]; v != nil && !isNull(v) {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return m, false, fmt.Errorf("%s: want true or false", f.name)
			}
		}
	}
	mode := KindChat
	for _, s := range []struct {
		name string
		dst  *string
	}{{"litellm_provider", &m.Provider}, {"mode", &mode}} {
		if v := fields[s.name]; v != nil && !isNull(v) {
			if err := json.Unmarshal(v, s.dst); err != nil {
				return m, false, fmt.Errorf("%s: want a string", s.name)
			}
		}
	}
	switch mode {
	case "chat", "completion", "responses":
		m.Kind = KindChat
	case "embedding":
		m.Kind = KindEmbedding
	default:
		return m, false, nil
	}
	return m, true, nil
}

// readLimits reads the token limits: max_input_tokens is the context
// window (input and output together, as providers count it),
// max_output_tokens the output limit, max_tokens its older name.
func (m *Listed) readLimits(fields map[string]json.RawMessage) error {
	var in, out, legacy int
	for _, f := range []struct {
		name string
		dst  *int
	}{{"max_input_tokens", &in}, {"max_output_tokens", &out}, {"max_tokens", &legacy}} {
		n, err := listTokens(fields[f.name])
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = n
	}
	if out == 0 {
		out = legacy
	}
	if in > 0 && out > in {
		out = in // the output counts against the window
	}
	m.ContextWindow, m.MaxOutputTokens = in, out
	return nil
}

// listCost reads a cost in dollars a token, a JSON number or a decimal
// string, as micros per million tokens; nil when absent.
func listCost(v json.RawMessage) (*int64, error) {
	if v == nil || isNull(v) {
		return nil, nil
	}
	text := string(v)
	if v[0] == '"' {
		if err := json.Unmarshal(v, &text); err != nil {
			return nil, errors.New("want a decimal number or string")
		}
	} else if _, err := strconv.ParseFloat(text, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
		// Only the syntax is asked of ParseFloat; the value is read in
		// decimal below.
		return nil, errors.New("want a decimal number or string")
	}
	n, err := budget.ParseDollarsPerToken(text)
	if err != nil {
		return nil, fmt.Errorf("%s dollars a token is not a whole number of micros per 1M tokens from 0 to %d: %w", strings.TrimSpace(text), budget.MaxPricePerMTok, err)
	}
	return &n, nil
}

// listTokens reads a token limit, a whole JSON number; 0 when absent.
func listTokens(v json.RawMessage) (int, error) {
	if v == nil || isNull(v) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 || n > budget.MaxUsageTokens {
		return 0, fmt.Errorf("want a whole number of tokens from 0 to %d", budget.MaxUsageTokens)
	}
	return int(n), nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// listFields are the fields of an entry Tollgate reads.
var listFields = []string{
	"input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost", "cache_creation_input_token_cost",
	"output_cost_per_reasoning_token", "max_input_tokens", "max_output_tokens", "max_tokens",
	"supports_function_calling", "supports_vision", "supports_response_schema", "supports_reasoning",
	"litellm_provider", "mode",
}

// checkSpelling refuses a field that is one Tollgate reads but for case or
// surrounding space ("Input_Cost_Per_Token", "mode "): fields are matched
// exactly, as LiteLLM does, so its value would be dropped silently.
func checkSpelling(fields map[string]json.RawMessage) error {
	for k := range fields {
		for _, want := range listFields {
			if k != want && strings.EqualFold(strings.TrimSpace(k), want) {
				return fmt.Errorf("field %q: write it %q (fields are matched exactly; this one would be ignored)", k, want)
			}
		}
	}
	return nil
}
