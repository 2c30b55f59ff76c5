package catalog

import "iter"

// Nameable yields every model a client may name, as Resolve makes it: the
// catalog's models, then the price list's others, then, with pass-through
// on, the model an unlisted name becomes (at the default price). It
// resolves each price-list name, so it costs a pass over the list: for
// figures taken once a request, not for every token.
func (c *Catalog) Nameable() iter.Seq[Model] {
	return func(yield func(Model) bool) {
		have := make(map[string]bool, len(c.Models))
		for _, m := range c.Models {
			have[m.Name] = true
			if !yield(m) {
				return
			}
		}
		if c.prices != nil {
			for _, key := range c.prices.keys {
				if have[key] {
					continue
				}
				if m, ok := c.listed(key); ok && !yield(m) {
					return
				}
			}
		}
		if c.PassThrough && len(c.Providers) > 0 {
			yield(Model{Name: "", Provider: c.Providers[0].Key, passThrough: true,
				InputMicrosPerMTok: c.DefaultInputMicrosPerMTok, OutputMicrosPerMTok: c.DefaultOutputMicrosPerMTok})
		}
	}
}
