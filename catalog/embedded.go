package catalog

import _ "embed"

// embeddedList is model_prices.json, built into the binary so that a
// server configured by nothing but the environment knows the prices,
// limits and capabilities of current models (which ones are reasoning
// models, their context windows) and refuses names no list has.
// deploy/prices/model_prices.json is the same file, for operators who
// start from a copy (TestEmbeddedPriceListIsShipped keeps the two equal).
//
//go:embed model_prices.json
var embeddedList []byte

// EmbeddedPriceList returns the price list built into the binary, parsed
// afresh on each call (the caller may keep it). It returns
// ParsePriceList's error, which the tests rule out for the file built in.
func EmbeddedPriceList() (*PriceList, error) { return ParsePriceList(embeddedList) }
