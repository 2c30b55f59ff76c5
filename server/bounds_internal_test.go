package server

import (
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"testing"
)

// bodyTypes are the types every request body (and every part of one
// decoded apart, such as a Responses input item) decodes into.
var bodyTypes = []reflect.Type{
	reflect.TypeFor[taskInput](),
	reflect.TypeFor[oaiRequest](),
	reflect.TypeFor[antRequest](),
	reflect.TypeFor[antCountRequest](),
	reflect.TypeFor[respRequest](),
	reflect.TypeFor[respFormat](),
	reflect.TypeFor[respFunctionTool](),
	reflect.TypeFor[respToolChoice](),
	reflect.TypeFor[respMessageItem](),
	reflect.TypeFor[respFunctionCallItem](),
	reflect.TypeFor[respFunctionOutputItem](),
	reflect.TypeFor[respPart](),
	reflect.TypeFor[oaiEmbeddingRequest](),
	reflect.TypeFor[routeCall](),
	reflect.TypeFor[budgetInput](),
	reflect.TypeFor[topupInput](),
	reflect.TypeFor[limitsInput](),
	reflect.TypeFor[privacyInput](),
	reflect.TypeFor[keyInput](),
	reflect.TypeFor[webhookInput](),
}

// Every numeric field a body can reach has the range the API documents
// (fieldBounds), so that no number is ever refused in terms of Go's
// types; and each range fits the Go type that holds it, so that a value
// within it always decodes.
func TestEveryNumericFieldHasABound(t *testing.T) {
	t.Parallel()
	var missing []string
	seen := map[reflect.Type]bool{}
	var walk func(ft reflect.Type, path string, b *bound)
	walk = func(ft reflect.Type, path string, b *bound) {
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sh, ok := shapes[ft]; ok {
			if sh.elem != nil {
				walk(reflect.SliceOf(sh.elem), path, b)
			}
			if sh.obj != nil {
				walk(sh.obj, path, b)
			}
			return
		}
		if freeForm(ft) {
			return
		}
		switch ft.Kind() {
		case reflect.Struct:
			if seen[ft] {
				return
			}
			seen[ft] = true
			for name, f := range jsonFields(ft) {
				walk(f.typ, path+"."+name, boundOf(f))
			}
			seen[ft] = false
		case reflect.Slice, reflect.Array, reflect.Map:
			walk(ft.Elem(), path+"[]", b)
		default:
			if !numeric(ft) {
				return
			}
			if b == nil {
				missing = append(missing, path)
				return
			}
			if err := fits(b, ft); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
	}
	for _, bt := range bodyTypes {
		walk(bt, bt.Name(), nil)
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("%s is a number with no documented range in fieldBounds", m)
	}
}

// fits reports whether every number within b decodes into t.
func fits(b *bound, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !b.whole {
			return fmt.Errorf("a fractional range on an integer field")
		}
		lo := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(t.Bits()-1)))
		hi := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(t.Bits()-1)), big.NewInt(1))
		if b.lo.Num().Cmp(lo) < 0 || b.hi.Num().Cmp(hi) > 0 {
			return fmt.Errorf("range %s does not fit %s", b.text(), t)
		}
		return nil
	}
	return fmt.Errorf("unexpected kind %s", t.Kind())
}
