package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/anthropicwire"
	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// The one check every JSON body goes through before encoding/json sees it
// (scanJSON). encoding/json is lenient where a gateway must not be: it
// matches field names case-insensitively (so "MAX_TOKENS" silently sets
// max_tokens, after or instead of the real one), keeps the last of two
// equal keys, turns invalid UTF-8 and lone surrogates into U+FFFD, lets
// "\u0000" through to PostgreSQL (which refuses it), and copies any number
// literal, 1e999999 included, into json.Number. Its type errors name Go
// types and Go field paths. scanJSON walks the tokens beside the Go type
// the body decodes into and refuses all of that with a 400 naming the
// field by its JSON path.

const (
	// maxJSONDepth bounds nesting: no request needs more, and a deeper
	// body is an attack on the decoder's stack.
	maxJSONDepth = 64
	// maxNumberLen and maxExponent bound a number literal, so that every
	// accepted number fits PostgreSQL's numeric (jsonb) as well as a
	// float64: at most 100 characters, an exponent of at most ±999, and
	// finite in double precision.
	maxNumberLen = 100
	maxExponent  = 999
	// maxPathKey bounds how much of a client's key a field path quotes.
	maxPathKey = 64
)

// scanMode says what to do with a key that names no field.
type scanMode int

const (
	// scanStrict refuses unknown fields (Tollgate's own API).
	scanStrict scanMode = iota
	// scanLenient collects the unknown members of the top-level object
	// (the OpenAI-compatible API, whose clients send fields Tollgate does
	// not act on; they are passed through), refuses unknown members below
	// it, and still refuses a case variant of a known one.
	scanLenient
	// scanNative collects the unknown members of the top-level object as
	// scanLenient does, and lists every unknown member, at any depth, by
	// its path: a body carried natively (provider.Native) reaches its
	// provider with them, so they are noted, not refused. Their values
	// are checked as any JSON is; a case variant of a known member is
	// still refused.
	scanNative
)

// scanJSON checks raw as the JSON encoding of a value of type t (nil: any
// JSON), found at root in the request ("" for the body), and returns the
// body encoding/json must decode: raw itself, or raw with integral numbers
// bound for integer fields ("1.0", "1e3") rewritten as plain integers; in
// scanLenient mode also the unknown members of the top-level object, as
// their raw JSON values. Its errors are 400 problems naming the field, or
// the decoder's own syntax errors (see decodeError).
func scanJSON(raw []byte, t reflect.Type, mode scanMode, root string) ([]byte, map[string]json.RawMessage, error) {
	s, err := scan(raw, t, mode, root)
	if err != nil {
		return nil, nil, err
	}
	return s.edited(), s.extra, nil
}

// scan is scanJSON's walk, the scanner returned with what it found.
func scan(raw []byte, t reflect.Type, mode scanMode, root string) (*scanner, error) {
	s := &scanner{raw: raw, dec: json.NewDecoder(bytes.NewReader(raw)), mode: mode}
	s.dec.UseNumber()
	if err := s.value(t, root, 0, nil); err != nil {
		return nil, err
	}
	if _, err := s.dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return s, nil
}

// edited is the body with the scanner's edits applied.
func (s *scanner) edited() []byte {
	raw := s.raw
	if len(s.edits) == 0 {
		return raw
	}
	var out bytes.Buffer
	last := 0
	for _, e := range s.edits {
		out.Write(raw[last:e.start])
		out.WriteString(e.text)
		last = e.end
	}
	out.Write(raw[last:])
	return out.Bytes()
}

type edit struct {
	start, end int
	text       string
}

type scanner struct {
	raw   []byte
	dec   *json.Decoder
	mode  scanMode
	edits []edit
	extra map[string]json.RawMessage // scanLenient: the top level's unknown members
	// unmodeled are the paths of the unknown members (scanNative), in
	// the body's order.
	unmodeled []string
}

// token reads the next token, remembering where it starts. A NaN or an
// Infinity where a value belongs is a *nonNumber, so that it is called
// what it is rather than a syntax error.
func (s *scanner) token() (json.Token, []byte, error) {
	start := int(s.dec.InputOffset())
	tok, err := s.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			if word := nonNumberAt(s.raw[start:]); word != "" {
				return nil, nil, &nonNumber{word: word}
			}
		}
		return nil, nil, err
	}
	return tok, s.raw[start:s.dec.InputOffset()], nil
}

// fieldErr is the 400 for one field.
func fieldErr(path, msg string) error {
	if path == "" {
		path = "body"
	}
	return badRequest(fmt.Sprintf("Field %q %s.", path, msg), tasks.FieldError{Field: path, Message: msg})
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

// freeForm reports whether t takes any JSON (nil, interfaces, types that
// decode themselves such as json.RawMessage).
func freeForm(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.Interface || t == numberType ||
		t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// shape is what a type that decodes itself accepts, for the types of the
// chat request that take more than one JSON form: scanJSON checks their
// members as it checks a struct's, and names the field that is wrong
// rather than leaving the type's own decoder to fail without a path.
type shape struct {
	text bool         // a string
	elem reflect.Type // an array of these; nil: no array
	obj  reflect.Type // an object of this type; nil: no object
	what string       // what the value must be, for the error
}

// namedToolChoice mirrors tool_choice's object form.
type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

var shapes = map[reflect.Type]shape{
	reflect.TypeFor[provider.Content]():      {text: true, elem: reflect.TypeFor[provider.Part](), what: "a string or an array of content parts"},
	reflect.TypeFor[provider.Stop]():         {text: true, elem: reflect.TypeFor[string](), what: "a string or an array of strings"},
	reflect.TypeFor[provider.ToolChoice]():   {text: true, obj: reflect.TypeFor[namedToolChoice](), what: `"none", "auto", "required" or {"type": "function", "function": {"name": ...}}`},
	reflect.TypeFor[anthropicwire.Content](): {text: true, elem: reflect.TypeFor[anthropicwire.Block](), what: "a string or an array of content blocks"},
}

// value checks one JSON value bound for t at path; b, when not nil, is
// the range the API documents for the numbers of the field it belongs to.
func (s *scanner) value(t reflect.Type, path string, depth int, b *bound) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var sh *shape
	if found, ok := shapes[t]; ok {
		sh = &found
	}
	if sh != nil || freeForm(t) {
		t = nil
	}
	tok, rawTok, err := s.token()
	var nn *nonNumber
	switch {
	case errors.As(err, &nn):
		return nn.at(path, b)
	case err != nil:
		return syntaxAt(err, path)
	case tok == nil:
		return nil // null leaves any field as it was, as encoding/json does
	case b != nil && numeric(t):
		if n, ok := tok.(json.Number); ok {
			return s.number(n, t, path, b)
		}
		return b.kindErr(path, tok)
	}
	switch v := tok.(type) {
	case json.Delim:
		return s.container(v, t, sh, path, depth, b)
	case json.Number:
		if sh != nil {
			return fieldErr(path, "must be "+sh.what)
		}
		return s.number(v, t, path, nil)
	}
	return scalarProblem(tok, rawTok, t, sh, path)
}

// container checks the object or array that v opens, bound for t (or
// the shape sh) at path, up to its closing delimiter.
func (s *scanner) container(v json.Delim, t reflect.Type, sh *shape, path string, depth int, b *bound) error {
	if depth >= maxJSONDepth {
		return fieldErr(path, fmt.Sprintf("is nested deeper than %d levels", maxJSONDepth))
	}
	if sh != nil {
		if (v == '{' && sh.obj == nil) || (v == '[' && sh.elem == nil) {
			return fieldErr(path, "must be "+sh.what)
		}
		t = sh.obj
		if v == '[' {
			t = reflect.SliceOf(sh.elem)
		}
	}
	if v == '{' {
		if t != nil && t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			return fieldErr(path, "must be "+kindName(t))
		}
		return s.object(t, path, depth+1, b)
	}
	if t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
		return fieldErr(path, "must be "+kindName(t))
	}
	var elem reflect.Type
	if t != nil {
		elem = t.Elem()
	}
	for i := 0; s.dec.More(); i++ {
		if err := s.value(elem, fmt.Sprintf("%s[%d]", path, i), depth+1, b); err != nil {
			return err
		}
	}
	_, _, err := s.token() // ']'
	return syntaxAt(err, path)
}

// scalarProblem checks a string or a boolean token bound for t (or the
// shape sh) at path.
func scalarProblem(tok json.Token, rawTok []byte, t reflect.Type, sh *shape, path string) error {
	switch v := tok.(type) {
	case string:
		if msg := stringProblem(v, rawTok); msg != "" {
			return fieldErr(path, msg)
		}
		if sh != nil && !sh.text {
			return fieldErr(path, "must be "+sh.what)
		}
		if t != nil && t.Kind() != reflect.String {
			return fieldErr(path, "must be "+kindName(t))
		}
	case bool:
		if sh != nil {
			return fieldErr(path, "must be "+sh.what)
		}
		if t != nil && t.Kind() != reflect.Bool {
			return fieldErr(path, "must be "+kindName(t))
		}
	}
	return nil
}

// object checks the members of an object bound for t (a struct, a map or
// nil) up to its closing brace; b is the map's bound, handed to its values.
func (s *scanner) object(t reflect.Type, path string, depth int, b *bound) error {
	var fields map[string]jsonField
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for s.dec.More() {
		tok, rawTok, err := s.token()
		if err != nil {
			return syntaxAt(err, path)
		}
		key, _ := tok.(string)
		kp := joinPath(path, key)
		if b != nil && !strings.HasSuffix(kp, "]") {
			// A bounded map's keys are data (logit_bias's token ids),
			// named as tasks.Validate names them.
			kp = path + "[" + strconv.Quote(key) + "]"
		}
		if msg := stringProblem(key, rawTok); msg != "" {
			return fieldErr(kp, "has a name that "+msg)
		}
		if seen[key] {
			return badRequest(fmt.Sprintf("The key %q appears twice in one object.", kp),
				tasks.FieldError{Field: kp, Message: "duplicated key"})
		}
		seen[key] = true
		var child reflect.Type
		var cb *bound
		switch {
		case t == nil:
		case t.Kind() == reflect.Map:
			child, cb = t.Elem(), b
		default:
			f, ok := fields[key]
			if ok {
				child, cb = f.typ, boundOf(f)
				break
			}
			if err := s.unknown(fields, key, kp, depth); err != nil {
				return err
			}
			continue
		}
		if err := s.value(child, kp, depth, cb); err != nil {
			return err
		}
	}
	_, _, err := s.token() // '}'
	return syntaxAt(err, path)
}

// syntaxAt names the member in which the JSON broke (a raw control
// character such as NUL in a string, a missing quote).
func syntaxAt(err error, path string) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return err
	}
	if path == "" {
		path = "body"
	}
	return badRequest(fmt.Sprintf("The request body is not valid JSON (at byte %d, in %q).", syn.Offset, path),
		tasks.FieldError{Field: path, Message: "is not valid JSON here (a raw control character, such as NUL, must be escaped)"})
}

// number checks a number literal against b, the range the API documents
// for its field (nil for a free-form value), and for an integer field
// rewrites an integral one ("1.0", "1e3") as the plain integer
// encoding/json accepts.
func (s *scanner) number(n json.Number, t reflect.Type, path string, b *bound) error {
	lit := string(n)
	r, ok := exactNumber(lit)
	switch {
	case !ok && b != nil:
		return b.err(path, true)
	case !ok:
		return fieldErr(path, fmt.Sprintf("must be a number of at most %d characters with an exponent of at most %d", maxNumberLen, maxExponent))
	case b != nil:
		if !b.holds(r) {
			return b.err(path, r.IsInt() || !b.whole)
		}
	default:
		if f, err := strconv.ParseFloat(lit, 64); err != nil || math.IsInf(f, 0) {
			return fieldErr(path, "must be a number within ±1.7976931348623157e308")
		}
	}
	if t == nil {
		return nil
	}
	var lo, hi *big.Int
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)))
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)), big.NewInt(1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lo = new(big.Int)
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(t.Bits())), big.NewInt(1))
	case reflect.Float32, reflect.Float64:
		return nil
	default:
		return fieldErr(path, "must be "+kindName(t))
	}
	// Every integer field has a documented bound (fieldBounds) within its
	// Go type; these are the fallbacks, which name no Go range.
	if !r.IsInt() {
		return fieldErr(path, "must be a whole number")
	}
	if r.Num().Cmp(lo) < 0 || r.Num().Cmp(hi) > 0 {
		return fieldErr(path, "is out of range")
	}
	if canon := r.Num().String(); canon != lit {
		end := int(s.dec.InputOffset())
		s.edits = append(s.edits, edit{start: end - len(lit), end: end, text: canon})
	}
	return nil
}

// exactNumber is the exact value of a JSON number literal, false for one
// longer than maxNumberLen or with an exponent beyond ±maxExponent.
func exactNumber(lit string) (*big.Rat, bool) {
	mant, exp, ok := splitNumber(lit)
	if !ok || len(lit) > maxNumberLen {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return nil, false
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil))
	if exp < 0 {
		return r.Quo(r, scale), true
	}
	return r.Mul(r, scale), true
}

// splitNumber splits a JSON number literal into its mantissa and its
// exponent, reporting false for an exponent beyond ±maxExponent.
func splitNumber(lit string) (mant string, exp int, ok bool) {
	i := strings.IndexAny(lit, "eE")
	if i < 0 {
		return lit, 0, true
	}
	digits := strings.TrimLeft(strings.TrimLeft(lit[i+1:], "+-"), "0")
	if len(digits) > 3 {
		return "", 0, false
	}
	e, _ := strconv.Atoi(digits) // "" is 0
	if strings.HasPrefix(lit[i+1:], "-") {
		e = -e
	}
	return lit[:i], e, e >= -maxExponent && e <= maxExponent
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// stringProblem says what is wrong with a decoded string whose raw token
// (quotes, escapes and any whitespace before it) is rawTok, or "".
func stringProblem(s string, rawTok []byte) string {
	if !utf8.Valid(rawTok) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain a NUL character (\\u0000)"
	}
	if strings.ContainsRune(s, utf8.RuneError) && loneSurrogate(rawTok) {
		return "holds an unpaired UTF-16 surrogate escape, which is not valid Unicode"
	}
	return ""
}

// loneSurrogate reports whether a raw JSON string escapes half of a
// UTF-16 surrogate pair alone (encoding/json would turn it into U+FFFD).
func loneSurrogate(raw []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if lo, ok := hex4(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// joinPath names a member: "messages[0].content", or metadata["a b"] for
// a key that is not a plain name. Long keys are cut short.
func joinPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	if len(key) > maxPathKey {
		key = strings.ToValidUTF8(key[:maxPathKey], "") + "…"
		plain = false
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// jsonField is one JSON member of a struct: its Go type, and the struct
// that declares it under name (for fieldBounds).
type jsonField struct {
	typ   reflect.Type
	owner reflect.Type
	name  string
}

// jsonFields maps each JSON member name of struct t to its field,
// following encoding/json's rules for tags and embedded structs (a
// shallower field wins) without its case-insensitive fallback.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for level := []reflect.Type{t}; len(level) > 0; {
		var next []reflect.Type
		found := map[string]jsonField{}
		for _, st := range level {
			for i := 0; i < st.NumField(); i++ {
				f := st.Field(i)
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				if !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				if _, shadowed := out[name]; !shadowed {
					found[name] = jsonField{typ: f.Type, owner: st, name: name}
				}
			}
		}
		for name, f := range found {
			out[name] = f
		}
		level = next
	}
	return out
}

// kindName says in JSON terms what a Go type accepts.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of another type"
}

// unknown handles the member key (at kp) that no field of the object's
// struct names: refused when a field differs from it only in case, or in
// scanStrict mode (scanLenient: below the top level); else its value is
// checked, kept when at the top level (extra) and, in scanNative mode,
// listed by its path.
func (s *scanner) unknown(fields map[string]jsonField, key, kp string, depth int) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			// encoding/json would bind it to name: field names
			// are case-sensitive here, so nothing binds twice.
			msg := fmt.Sprintf("is not a field; names are case-sensitive (did you mean %q?)", name)
			return badRequest(fmt.Sprintf("Unknown field %q: field names are case-sensitive (did you mean %q?).", kp, name),
				tasks.FieldError{Field: kp, Message: msg})
		}
	}
	if s.mode == scanStrict || (s.mode == scanLenient && depth > 1) {
		return badRequest(fmt.Sprintf("Unknown field %q.", kp), tasks.FieldError{Field: kp, Message: "unknown field"})
	}
	start := int(s.dec.InputOffset())
	if err := s.value(nil, kp, depth, nil); err != nil {
		return err
	}
	if s.mode == scanNative {
		s.unmodeled = append(s.unmodeled, kp)
		if depth > 1 {
			return nil
		}
	}
	if s.extra == nil {
		s.extra = map[string]json.RawMessage{}
	}
	// The value read, without the colon and space before it.
	s.extra[key] = bytes.TrimLeft(s.raw[start:s.dec.InputOffset()], " \t\r\n:")
	return nil
}
