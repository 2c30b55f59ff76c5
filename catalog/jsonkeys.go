package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// duplicateKey returns the first key that an object of the JSON text raw
// gives twice, with the keys of the objects around it (path), outermost
// first; found is false when there is none. encoding/json keeps the last
// of two equal keys and says nothing, so a price list that lists a model
// twice, or a cost twice within a model, would lose one price silently.
// Keys are compared as decoded: "gpt-4o" and "gpt\u002d4o" are the same
// key. It returns an error for text that is not JSON.
func duplicateKey(raw []byte) (path []string, key string, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// One frame per open object or array: an object's keys seen so far,
	// and the key its value is under in its parent ("" in an array).
	type frame struct {
		object bool
		seen   map[string]bool
		under  string
		expect bool // an object's next token is a key
	}
	var stack []frame
	pathOf := func() []string {
		var p []string
		for _, f := range stack[1:] {
			if f.under != "" { // an array's element is under no key
				p = append(p, f.under)
			}
		}
		return p
	}
	var pending string // the key the next value is under
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", false, err
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expect {
			if k, ok := tok.(string); ok {
				top := &stack[n-1]
				if top.seen[k] {
					return pathOf(), k, true, nil
				}
				top.seen[k], top.expect, pending = true, false, k
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, seen: map[string]bool{}, under: pending, expect: true})
			pending = ""
			continue
		case json.Delim('['):
			stack = append(stack, frame{under: pending})
			pending = ""
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object around it expects a key again.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expect = true
		}
		pending = ""
	}
}

// duplicateError is the error for a key duplicateKey found: a model
// listed twice, or a field given twice within one model's entry.
func duplicateError(path []string, key string) error {
	if len(path) == 0 {
		return fmt.Errorf("price list: model %q is listed twice (JSON keeps only the last; remove one)", key)
	}
	where := ""
	for _, p := range path[1:] {
		where += p + "."
	}
	return fmt.Errorf("price list: model %q: %q is given twice (JSON keeps only the last; remove one)", path[0], where+key)
}
