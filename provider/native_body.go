package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// rawPayload is a request body sent as these bytes, never re-encoded: a
// natively carried body (native.go) reaches the provider as the client
// wrote it.
type rawPayload []byte

// encodePayload is the bytes of a call's payload: a rawPayload as it is,
// anything else as JSON.
func encodePayload(v any) ([]byte, error) {
	if raw, ok := v.(rawPayload); ok {
		return raw, nil
	}
	return json.Marshal(v)
}

// errNotObject: a native body that is not a JSON object.
var errNotObject = errors.New("provider: a native body must be a JSON object")

// spliceMember is body, a JSON object, with its top-level member key set
// to value (JSON): the member's value replaced where it stands, or the
// member added first when absent. Nothing else of body changes, its
// spacing and key order included.
func spliceMember(body []byte, key string, value []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	open := int(dec.InputOffset())
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		afterKey := int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		if name, _ := tok.(string); name == key {
			// The value ends at end; it starts after the colon and any
			// space after the key.
			start := afterKey + bytes.IndexByte(body[afterKey:end], ':') + 1
			start += len(body[start:end]) - len(bytes.TrimLeft(body[start:end], " \t\r\n"))
			return concat(body[:start], value, body[end:]), nil
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	member, _ := json.Marshal(key)
	member = append(append(member, ':'), value...)
	rest := bytes.TrimLeft(body[open:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		member = append(member, ',')
	}
	return concat(body[:open], member, body[open:]), nil
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
