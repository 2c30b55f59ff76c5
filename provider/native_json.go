package provider

import (
	"bytes"
	"encoding/json"
)

// A Native's body must reach the provider byte for byte after it has been
// stored (the sealed raw request is a task request's JSON), but
// encoding/json compacts every raw value it writes and escapes its HTML
// characters. So a Native's JSON holds its body as a string of its exact
// bytes; a body written as a JSON value (an older or hand-made record) is
// read as that value.

type nativeJSON struct {
	API       API                 `json:"api"`
	Body      json.RawMessage     `json:"body,omitempty"`
	Unmodeled []string            `json:"unmodeled,omitempty"`
	Header    map[string][]string `json:"header,omitempty"`
}

// MarshalJSON writes n with its body as a string of its bytes, and no
// body for none (a stored record keeps the body only sealed).
func (n Native) MarshalJSON() ([]byte, error) {
	var body json.RawMessage
	if len(n.Body) > 0 {
		b, err := json.Marshal(string(n.Body))
		if err != nil {
			return nil, err
		}
		body = b
	}
	return json.Marshal(nativeJSON{API: n.API, Body: body, Unmodeled: n.Unmodeled, Header: n.Header})
}

// UnmarshalJSON reads a body given as a string of its bytes, or as a JSON
// value.
func (n *Native) UnmarshalJSON(b []byte) error {
	var w nativeJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*n = Native{API: w.API, Unmodeled: w.Unmodeled, Header: w.Header}
	raw := bytes.TrimSpace(w.Body)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		n.Body = json.RawMessage(s)
		return nil
	}
	if len(raw) > 0 && string(raw) != "null" {
		n.Body = append(json.RawMessage(nil), raw...)
	}
	return nil
}
