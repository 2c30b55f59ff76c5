package catalog

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// UsePriceList makes l the catalog's price list. It fills what the
// catalog leaves unsaid about its models (prices of every usage class,
// context window, output limit, capabilities, kind) from l's entry for the
// model's provider-side name, the catalog's own values winning; it makes
// the names l lists, and no catalog model has, models clients may name
// (run on the first provider of the entry's kind, else the first
// provider); and it turns pass-through off unless passThrough (the
// TOLLGATE_PASS_THROUGH switch) or the catalog file's own pass_through
// asks for it, so that a name neither lists is refused (Resolve's
// *UnknownModelError, with close matches), not charged at the default
// price. It returns an error when the default model then resolves to
// nothing or to an embedding model.
func (c *Catalog) UsePriceList(l *PriceList, passThrough bool) error {
	c.prices = l
	kinds := map[string]string{}
	for _, p := range c.Providers {
		kinds[p.Key] = p.Kind
	}
	for i := range c.Models {
		m := &c.Models[i]
		if e, ok := l.find(m.ProviderModel, kinds[m.Provider]); ok {
			m.fill(e)
		}
	}
	if c.implicitPassThrough {
		c.PassThrough = passThrough
	} else {
		c.PassThrough = c.PassThrough || passThrough
	}
	m, _, err := c.Resolve("")
	if err != nil {
		return fmt.Errorf("catalog: default model %q is neither a catalog model nor in the price list (TOLLGATE_PASS_THROUGH=on passes unlisted names through)", c.DefaultModel)
	}
	if !m.Serves(false) {
		return fmt.Errorf("catalog: default model %q is an embedding model by the price list; the default serves chat calls", c.DefaultModel)
	}
	return nil
}

// fill sets what m's file entry does not from e. A model e describes is
// described from then on: its capabilities are checked.
func (m *Model) fill(e Listed) {
	set := func(key string) bool { return m.set[key] }
	if !set("kind") && m.Kind == "" && e.Kind == KindEmbedding && !slices.ContainsFunc(chatOnlyKeys, set) {
		m.Kind = KindEmbedding // what the file says of the model is not chat-only
	}
	m.passThrough = false
	if !set("input_micros_per_mtok") && e.Input != nil {
		m.InputMicrosPerMTok = *e.Input
	}
	if m.kind() == KindEmbedding {
		return // an input price is all an embedding model has
	}
	m.fillOutputPrices(e, set)
	m.fillLimits(e, set)
	for _, f := range []struct {
		key  string
		dst  *bool
		from bool
	}{{"tools", &m.Tools, e.Tools}, {"vision", &m.Vision, e.Vision}, {"json_schema", &m.JSONSchema, e.JSONSchema}, {"reasoning", &m.Reasoning, e.ReasoningModel}} {
		if !set(f.key) {
			*f.dst = f.from
		}
	}
}

// fillOutputPrices sets the output and class prices the file does not.
func (m *Model) fillOutputPrices(e Listed, set func(string) bool) {
	if !set("output_micros_per_mtok") && e.Output != nil {
		m.OutputMicrosPerMTok = *e.Output
	}
	for _, p := range []struct {
		key  string
		dst  **int64
		from *int64
	}{
		{"cached_input_micros_per_mtok", &m.CachedInputMicrosPerMTok, e.CachedInput},
		{"cache_write_micros_per_mtok", &m.CacheWriteMicrosPerMTok, e.CacheWrite},
		{"reasoning_micros_per_mtok", &m.ReasoningMicrosPerMTok, e.Reasoning},
	} {
		if !set(p.key) && p.from != nil {
			v := *p.from
			*p.dst = &v
		}
	}
}

// fillLimits sets the context window and output limit the file does not,
// the list's output limit cut to the window so that the pair stays valid.
func (m *Model) fillLimits(e Listed, set func(string) bool) {
	if !set("context_window") && m.ContextWindow == 0 {
		m.ContextWindow = e.ContextWindow
	}
	if !set("max_output_tokens") && m.MaxOutputTokens == 0 {
		m.MaxOutputTokens = e.MaxOutputTokens
		if m.ContextWindow > 0 && m.MaxOutputTokens > m.ContextWindow {
			m.MaxOutputTokens = m.ContextWindow
		}
	}
}

// chatOnlyKeys are the keys of a catalog model that only a chat model has:
// a file that sets one describes a chat model, whatever a list says.
var chatOnlyKeys = []string{"output_micros_per_mtok", "cached_input_micros_per_mtok", "cache_write_micros_per_mtok",
	"reasoning_micros_per_mtok", "max_output_tokens", "tools", "vision", "json_schema", "reasoning", "fallback"}

// listed is the model the price list makes of a name no catalog model
// has: on the first provider of the entry's kind (the first provider when
// none is), under its provider-side name (the key without its provider
// prefix), described by the entry.
func (c *Catalog) listed(name string) (Model, bool) {
	if c.prices == nil {
		return Model{}, false
	}
	e, ok := c.prices.find(name, "")
	for _, p := range c.Providers {
		if ok {
			break
		}
		e, ok = c.prices.find(name, p.Kind)
	}
	if !ok {
		return Model{}, false
	}
	m := Model{Name: name, Provider: c.Providers[0].Key, ProviderModel: name}
	for _, p := range c.Providers {
		if p.Kind == e.Provider {
			m.Provider = p.Key
			break
		}
	}
	if e.Provider != "" {
		if rest, cut := strings.CutPrefix(e.Key, e.Provider+"/"); cut {
			m.ProviderModel = rest
		}
	}
	m.fill(e)
	return m, true
}

// UnknownModelError is Resolve's answer for a name neither the catalog nor
// its price list has, with pass-through off. It is ErrUnknownModel.
type UnknownModelError struct {
	Name string
	// Suggestions are up to three close names (by edit distance or
	// prefix) the catalog or its price list has; only with a price list.
	Suggestions []string
}

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("%v: %q", ErrUnknownModel, e.Name)
}

// Is makes an *UnknownModelError match ErrUnknownModel.
func (e *UnknownModelError) Is(target error) bool { return target == ErrUnknownModel }

// maxSuggestName bounds the names close matches are looked for: a longer
// one is no typo of a model name, and the bound keeps the search cheap.
const maxSuggestName = 100

// closeMatches returns up to three names of the catalog and its price list
// close to name: within a few edits, or one a prefix of the other.
func (c *Catalog) closeMatches(name string) []string {
	if len(name) > maxSuggestName || name == "" {
		return nil
	}
	type match struct {
		name string
		dist int
	}
	limit := min(max(2, len(name)/5), 4)
	var found []match
	consider := func(cand string) {
		d := editDistance(name, cand, limit)
		prefix := len(name) >= 3 && (strings.HasPrefix(cand, name) || strings.HasPrefix(name, cand))
		if d <= limit || prefix {
			found = append(found, match{cand, d})
		}
	}
	for _, m := range c.Models {
		consider(m.Name)
	}
	if c.prices != nil {
		for _, k := range c.prices.keys {
			consider(k)
			// A client may name a prefixed entry without its prefix
			// when a provider of its kind serves it.
			if e := c.prices.models[k]; e.Provider != "" && slices.ContainsFunc(c.Providers, func(p Provider) bool { return p.Kind == e.Provider }) {
				if bare, cut := strings.CutPrefix(k, e.Provider+"/"); cut {
					consider(bare)
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b match) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, f := range found {
		if len(out) == 3 {
			break
		}
		if !slices.Contains(out, f.name) {
			out = append(out, f.name)
		}
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, in bytes, or
// limit+1 once it is certain to exceed limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit+1)
}

// modelKeys records, per model of a catalog file, the keys the file
// sets, so that a price list fills only the others.
func modelKeys(raw []byte) ([]map[string]bool, error) {
	var doc struct {
		Models []map[string]any `yaml:"models"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	out := make([]map[string]bool, len(doc.Models))
	for i, m := range doc.Models {
		out[i] = map[string]bool{}
		for k := range m {
			out[i][k] = true
		}
	}
	return out, nil
}
